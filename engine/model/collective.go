package model

// Collective is one rank's handle on a group of model instances that run
// the same iterations in lockstep, each on its own backend (tensor and
// expert parallelism, shard.go). Every rank of the group makes the same
// calls in the same order with tensors of the same shapes; a call returns
// on a rank once that rank's result is in place.
//
// Like the backend's ops, the data movements return nothing: a failure
// (ranks that disagree on a shape, a group aborted because a rank failed)
// is recorded and reported by the next Barrier, which the model calls
// where the backend synchronises (Argmax). An implementation must be
// deterministic: AllReduceSum adds the ranks' values in rank order, so
// every rank gets the same bits and reruns repeat them.
//
// The CPU backend's implementation (cpu.Group) runs the ranks as
// goroutines of one process. A GPU implementation wraps NCCL: one
// communicator per group, one OS thread per GPU (runtime.LockOSThread, so
// the rank's CUDA context stays current), the calls queued on the rank's
// stream like any kernel, so an iteration with collectives can still be
// captured as a CUDA graph.
type Collective interface {
	// Rank is this rank's index in the group, Size the group's ranks.
	Rank() int
	Size() int
	// AllReduceSum replaces the first rows of t, on every rank, by their
	// sum over the ranks.
	AllReduceSum(t Tensor, rows int)
	// AllGather concatenates the ranks' in along columns into out on
	// every rank: out[r][j·w : (j+1)·w] = in of rank j [r], for the first
	// rows, w being in's width and out's Size()·w. (NCCL gathers whole
	// buffers rank after rank; its implementation transposes the blocks.)
	AllGather(out, in Tensor, rows int)
	// Barrier returns once every rank has called it, with the first
	// failure of this rank's collectives so far.
	Barrier() error
}

// CollectiveGroup is a group of ranks a backend's collectives connect
// (engine.RegisterCollectives makes them): cpu.Group in-process, an NCCL
// unique id on GPUs.
type CollectiveGroup interface {
	// Join is rank's handle on the group, bound to the rank's backend. It
	// is called on the rank's thread, by every rank at once: NCCL's
	// ncclCommInitRank returns only when all ranks have joined.
	Join(rank int, be Backend) (Collective, error)
	// Abort fails every call in progress or to come, so ranks waiting for
	// a rank that failed return; Reset readies the group again once no
	// rank is inside a call.
	Abort(err error)
	Reset()
}

package model

// Batch is one iteration's work: a flat run of tokens mixing prefill chunks
// and decode tokens of several sequences, each sequence's tokens
// contiguous. Backends upload it once per iteration (SetBatch); every op
// that needs positions or slots reads it from there.
type Batch struct {
	Tokens    []int32 // token ids
	Positions []int32 // each token's position in its sequence
	Seqs      []Seq
	// LogitRows are the rows of Tokens whose next-token logits are wanted:
	// the last token of each sequence that samples this iteration
	// (ascending). Tests ask for every row.
	LogitRows []int32
	// Fed are the rows of Tokens whose ids are picks of the previous
	// iteration's ArgmaxStart that have not reached the host yet (a
	// Pipeliner's batch only): Tokens holds 0 there and the backend reads
	// the id on the device instead. This is what lets the engine queue an
	// iteration before the previous one's tokens are back.
	Fed []Fed
	// Blocks are the block tables of a paged KV cache (KVConfig.Paged):
	// sequence s's positions p live in block Blocks[s.Block+p/BlockSize],
	// which must list a block for every position up to Past+Len. Empty
	// for a cache of fixed slots.
	Blocks []int32
}

// Fed is a batch token whose id is the previous iteration's Pick-th pick.
type Fed struct{ Row, Pick int32 }

// Seq is one sequence's share of a Batch.
type Seq struct {
	Slot  int32 // KV-cache slot, held for the request's whole life
	Start int32 // first row of this sequence in Batch.Tokens
	Len   int32 // new tokens this iteration (a prefill chunk, or 1 to decode)
	Past  int32 // tokens already in the cache: the first new token's position
	// Block and NBlocks locate the sequence's block table in Batch.Blocks
	// (a paged cache only).
	Block, NBlocks int32
}

// Reset empties the batch, keeping its memory.
func (b *Batch) Reset() {
	b.Tokens = b.Tokens[:0]
	b.Positions = b.Positions[:0]
	b.Seqs = b.Seqs[:0]
	b.LogitRows = b.LogitRows[:0]
	b.Fed = b.Fed[:0]
	b.Blocks = b.Blocks[:0]
}

// SetBlocks gives the sequence added last its block table (a paged KV
// cache): the blocks holding its positions, in order.
func (b *Batch) SetBlocks(blocks []int32) {
	s := &b.Seqs[len(b.Seqs)-1]
	s.Block, s.NBlocks = int32(len(b.Blocks)), int32(len(blocks))
	b.Blocks = append(b.Blocks, blocks...)
}

// SeqBlocks is sequence s's block table.
func (b *Batch) SeqBlocks(s Seq) []int32 { return b.Blocks[s.Block : s.Block+s.NBlocks] }

// Add appends a sequence's new tokens, which follow past cached tokens in
// KV slot slot. With logits set, the last new token's logits are wanted.
// It returns the sequence's first row.
func (b *Batch) Add(slot, past int, tokens []int32, logits bool) int {
	start := len(b.Tokens)
	b.Tokens = append(b.Tokens, tokens...)
	for i := range tokens {
		b.Positions = append(b.Positions, int32(past+i))
	}
	b.Seqs = append(b.Seqs, Seq{Slot: int32(slot), Start: int32(start), Len: int32(len(tokens)), Past: int32(past)})
	if logits {
		b.LogitRows = append(b.LogitRows, int32(start+len(tokens)-1))
	}
	return start
}

// NumTokens is the number of tokens in the batch.
func (b *Batch) NumTokens() int { return len(b.Tokens) }

// AddFed appends one decode token of the sequence in KV slot slot, after
// past cached tokens, whose id is pick pick of the previous iteration (see
// Batch.Fed); its logits are wanted. It returns the token's row.
func (b *Batch) AddFed(slot, past, pick int) int {
	row := b.Add(slot, past, []int32{0}, true)
	b.Fed = append(b.Fed, Fed{Row: int32(row), Pick: int32(pick)})
	return row
}

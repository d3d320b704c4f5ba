package cupti

import (
	"fmt"
	"sync"

	"github.com/xrun-dev/xrun/engine/cenv"
)

var (
	openMu   sync.Mutex
	opened   bool
	session  *Session
	openErr  error
	selfTest error
)

// Open returns the process's CUPTI session, loading libcupti and claiming
// CUPTI's subscriber slot on the first call. Call it only when a profiled
// pass begins (model.Profiler.StartProfile), never before timed runs: a
// loaded CUPTI may slow kernel launches even with no activity enabled.
//
// It returns an *UnavailableError when CUPTI cannot be used: not compiled
// in, no libcupti, or another profiler holding it (StepAside). Later calls
// return the same session or error.
func Open() (*Session, error) {
	openMu.Lock()
	defer openMu.Unlock()
	if !opened {
		opened = true
		session, openErr = open()
	}
	return session, openErr
}

// injectionEnv names the library a profiler (nsys, ncu) injects into CUDA.
// It is looked up where libcuda looks (cenv): a launcher may set it after
// exec, out of os.Getenv's sight.
const injectionEnv = "CUDA_INJECTION64_PATH"

// nsightEnv are variables the Nsight tools' launcher sets in the processes
// it follows. Nsight Compute 2025.3 (CUDA 13.0) sets no
// CUDA_INJECTION64_PATH that the process can see, before or after cuInit:
// it attaches through the libraries its launcher preloads (cenv.ToolLibs)
// instead, and under it xrun's CUPTI subscription succeeded while ncu
// recorded no kernel of the window.
var nsightEnv = []string{"NV_TPS_LAUNCH_TOKEN", "NV_NSIGHT_INJECTION_TRANSPORT_TYPE"}

// attachedProfiler names the outside profiler this process runs under, or
// "" when none: an injection path where libcuda reads it (getenv), the
// Nsight launcher's variables, or the Nsight tools' libraries among the
// process's mappings (maps: /proc/self/maps).
func attachedProfiler(getenv func(string) string, maps func() string) string {
	if p := getenv(injectionEnv); p != "" {
		return injectionEnv + "=" + p
	}
	for _, v := range nsightEnv {
		if getenv(v) != "" {
			return v + " set (the Nsight tools' launcher)"
		}
	}
	if libs := cenv.ToolLibs(maps()); len(libs) > 0 {
		return libs[0] + " loaded"
	}
	return ""
}

func open() (*Session, error) {
	if p := attachedProfiler(cenv.Getenv, cenv.SelfMaps); p != "" {
		return nil, &UnavailableError{StepAside: true,
			Reason: fmt.Sprintf("another profiler is attached (%s, as under nsys or ncu); xrun steps aside and that profiler records the window (cuProfilerStart/Stop)", p)}
	}
	b, err := loadBackend()
	if err != nil {
		return nil, err
	}
	return newSession(b)
}

// RecordSelfTest keeps the outcome of Session.SelfTest for Notes, so that
// reports say whether the record layout was verified.
func RecordSelfTest(err error) {
	openMu.Lock()
	defer openMu.Unlock()
	selfTest = err
}

// Notes are the lines a report should carry about CUPTI in this process:
// why there are no records, records dropped, a layout that did not pass
// its self-test. Nil when Open was never called (the CPU backend).
func Notes() []string {
	openMu.Lock()
	defer openMu.Unlock()
	if !opened {
		return nil
	}
	if openErr != nil {
		return []string{"no kernel records: " + openErr.Error()}
	}
	var out []string
	st := session.Stats()
	if st.Dropped > 0 {
		out = append(out, fmt.Sprintf("CUPTI dropped %d records: the kernel summary misses them", st.Dropped))
	}
	if st.Invalid > 0 {
		out = append(out, fmt.Sprintf("%d CUPTI records ended after the next iteration began (impossible timestamps) and were left out", st.Invalid))
	}
	switch {
	case selfTest != nil:
		out = append(out, "CUPTI record layout failed its self-test: "+selfTest.Error())
	case !st.Verified:
		out = append(out, fmt.Sprintf("CUPTI record layout (%s, API version %d) not verified by a self-test", st.Layout, st.Version))
	}
	return out
}

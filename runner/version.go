package runner

import (
	"runtime"
	"runtime/debug"
)

// Set at link time by the Makefile:
//
//	-ldflags "-X github.com/xrun-dev/xrun/runner.version=... -X github.com/xrun-dev/xrun/runner.commit=..."
var (
	version = "dev"
	commit  = ""
)

// BuildInfo identifies the xrun binary. It is part of every results file's
// environment fingerprint, so a new build reruns cells under --resume.
type BuildInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go_version"`
}

// Build reports the running binary's version, commit and Go version. The
// commit comes from the linker flag or, failing that, from the VCS stamp Go
// embeds when building inside a repository.
func Build() BuildInfo {
	b := BuildInfo{Version: version, Commit: commit, GoVersion: runtime.Version()}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				if b.Commit == "" {
					b.Commit = s.Value
				}
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
		if b.Version == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			b.Version = info.Main.Version
		}
	}
	return b
}

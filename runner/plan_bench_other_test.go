//go:build !unix

package runner

import "time"

func processCPU() time.Duration { return 0 }

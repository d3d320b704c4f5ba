//go:build !unix

package driver

import "context"

// Lock is a no-op where flock(2) does not exist: concurrent builds of the
// same engine then both build it, and the later rename wins.
func Lock(context.Context, string) (func(), error) { return func() {}, nil }

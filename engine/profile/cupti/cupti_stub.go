//go:build !(cgo && linux)

package cupti

import "os"

func injectionPath() string { return os.Getenv(injectionEnv) }

func loadBackend() (backend, error) {
	return nil, &UnavailableError{Reason: "not compiled in (this xrun was built without cgo on linux)"}
}

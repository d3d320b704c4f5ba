//go:build !(cgo && linux)

package cupti

func loadBackend() (backend, error) {
	return nil, &UnavailableError{Reason: "not compiled in (this xrun was built without cgo on linux)"}
}

package results

import "errors"

// ErrRegression is returned (wrapped) by a diff that found a significant
// regression beyond its threshold.
var ErrRegression = errors.New("significant regression")

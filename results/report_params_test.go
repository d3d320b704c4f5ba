package results

import "testing"

// request_rate inf and concurrency none are stored as 0 (JSON has no
// infinity, and the fingerprint wants one canonical value); tables show
// the words the spec used, and other parameters' 0 stays 0.
func TestFormatParamZeroWords(t *testing.T) {
	for _, tc := range []struct {
		key  string
		v    any
		want string
	}{
		{"request_rate", float64(0), "inf"},
		{"request_rate", int64(0), "inf"},
		{"request_rate", 16.5, "16.5"},
		{"concurrency", int64(0), "none"},
		{"concurrency", int64(4), "4"},
		{"batch_size", int64(0), "0"},
		{"request_rate", "inf", "inf"},
	} {
		if got := formatParam(tc.key, tc.v); got != tc.want {
			t.Errorf("formatParam(%s, %v) = %q, want %q", tc.key, tc.v, got, tc.want)
		}
	}
	c := &Cell{Params: map[string]any{"request_rate": float64(0)}}
	if got := ParamString(c, "request_rate"); got != "inf" || !IsZeroWord("request_rate", got) || IsZeroWord("batch_size", "inf") {
		t.Errorf("ParamString = %q", got)
	}
}

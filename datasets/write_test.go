package datasets

import (
	"math"
	"strconv"
	"testing"
)

func TestAppendInt32(t *testing.T) {
	vals := []int32{0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 9999, 10000, 99999, 100000, 127999,
		999999, 1000000, 9999999, 10000000, 99999999, 100000000, 999999999, 1000000000, math.MaxInt32, -1, math.MinInt32}
	for p := int64(1); p <= math.MaxInt32; p *= 10 {
		vals = append(vals, int32(p-1), int32(p), int32(min(p+1, math.MaxInt32)))
	}
	for _, v := range vals {
		if got, want := string(appendInt32([]byte("x"), v)), "x"+strconv.Itoa(int(v)); got != want {
			t.Errorf("appendInt32(%d) = %q, want %q", v, got, want)
		}
	}
}

func TestPyJSONString(t *testing.T) {
	// Python: json.dumps("a\"b\\c\n\t\x01\x7fé/<>&", ensure_ascii=False)
	got := string(appendPyJSONString(nil, "a\"b\\c\n\t\x01\x7fé/<>&"))
	want := `"a\"b\\c\n\t\u0001` + "\x7fé/<>&\""
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	for dir, want := range map[string]string{"": "3", "a": "a/3", "a/": "a/3", "/x/y": "/x/y/3"} {
		if got := pyPathJoin(dir, "3"); got != want {
			t.Errorf("pyPathJoin(%q) = %q, want %q", dir, got, want)
		}
	}
}

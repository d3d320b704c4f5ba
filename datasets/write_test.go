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
	for v := int32(0); v < 2_000_000; v++ {
		vals = append(vals, v)
	}
	for v := int64(2_000_000); v <= math.MaxInt32; v += 9973 {
		vals = append(vals, int32(v))
	}
	var buf []byte
	for _, v := range vals {
		buf = appendInt32(append(buf[:0], 'x'), v)
		if got, want := string(buf), "x"+strconv.Itoa(int(v)); got != want {
			t.Fatalf("appendInt32(%d) = %q, want %q", v, got, want)
		}
	}
	// Consecutive appends overwrite the scratch bytes of the 8-byte store.
	buf = buf[:0]
	for _, v := range []int32{7, 123456, 0, 99999999, 42} {
		buf = append(appendInt32(buf, v), ',')
	}
	if string(buf) != "7,123456,0,99999999,42," {
		t.Errorf("sequence = %q", buf)
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

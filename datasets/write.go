package datasets

import (
	"bufio"
	"encoding/binary"
	"io"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Writer writes requests in trtllm-bench's line format, exactly as
// prepare_dataset.py prints them (json.dumps with separators=(',', ':')):
//
//	{"task_id":0,"input_ids":[863,22056],"output_tokens":128}
//
// followed, for requests with a LoRA task, by
// ,"lora_request":{"lora_name":"lora_3","lora_int_id":3,"lora_path":"<LoRADir>/3"}
// before the closing brace. Formatting is hand-written and reuses one
// scratch buffer, so writing allocates nothing per request.
type Writer struct {
	// LoRADir is the directory lora_path is built from (os.path.join(dir, id)).
	LoRADir string

	bw      *bufio.Writer
	scratch []byte
}

const writeBufSize = 256 << 10

// NewWriter buffers its output; call Flush at the end.
func NewWriter(w io.Writer) *Writer {
	return &Writer{bw: bufio.NewWriterSize(w, writeBufSize)}
}

// Write appends one request line.
func (w *Writer) Write(r *Request) error {
	// Longest possible line: 11 bytes per id ("-2147483648" never occurs,
	// ids are non-negative, but stay safe), fixed keys, LoRA object.
	bound := 64 + 12*len(r.InputIDs)
	if r.LoRATaskID != nil {
		bound += 128 + 6*len(w.LoRADir)
	}
	if w.bw.Available() < bound {
		if err := w.bw.Flush(); err != nil {
			return err
		}
	}
	if w.bw.Available() >= bound {
		// Format straight into bufio's free space: no copy, no allocation.
		b := AppendRequest(w.bw.AvailableBuffer(), r, w.LoRADir)
		_, err := w.bw.Write(b)
		return err
	}
	w.scratch = AppendRequest(w.scratch[:0], r, w.LoRADir)
	_, err := w.bw.Write(w.scratch)
	return err
}

// Flush writes any buffered data to the underlying writer.
func (w *Writer) Flush() error { return w.bw.Flush() }

// AppendRequest appends r's line, newline included, to dst.
func AppendRequest(dst []byte, r *Request, loraDir string) []byte {
	dst = append(dst, `{"task_id":`...)
	dst = strconv.AppendInt(dst, int64(r.TaskID), 10)
	dst = append(dst, `,"input_ids":[`...)
	for i, t := range r.InputIDs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendInt32(dst, t)
	}
	dst = append(dst, `],"output_tokens":`...)
	dst = strconv.AppendInt(dst, int64(r.OutputTokens), 10)
	if r.LoRATaskID != nil {
		id := strconv.Itoa(*r.LoRATaskID)
		dst = append(dst, `,"lora_request":{"lora_name":"lora_`...)
		dst = append(dst, id...)
		dst = append(dst, `","lora_int_id":`...)
		dst = append(dst, id...)
		dst = append(dst, `,"lora_path":`...)
		dst = appendPyJSONString(dst, pyPathJoin(loraDir, id))
		dst = append(dst, '}')
	}
	return append(dst, "}\n"...)
}

// digits2 holds "00".."99" for two-digits-at-a-time formatting.
const digits2 = "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"

// appendInt32 formats a token id; it is the hot path of dataset writing.
// Ids below 10^8 (every real vocabulary) are converted to eight ASCII digits
// inside one 64-bit word, SIMD-within-a-register style, and stored at once:
// the word is split into two 4-digit lanes, each into 2-digit lanes, each
// into single digits, using multiply-shift divisions that stay exact and
// never carry across lanes for these ranges (v*5243>>19 == v/100 for
// v < 10^4, w*103>>10 == w/10 for w < 100). The lowest byte holds the most
// significant digit, so leading zeros are the word's low zero bytes.
func appendInt32(dst []byte, v int32) []byte {
	u := uint32(v)
	if v < 0 || u >= 1e8 {
		return strconv.AppendInt(dst, int64(v), 10)
	}
	x := uint64(u/1e4) | uint64(u%1e4)<<32
	q := (x * 5243 >> 19) & 0x0000007f0000007f
	x = q | (x-q*100)<<16
	t := (x * 103 >> 10) & 0x000f000f000f000f
	x = t | (x-t*10)<<8
	zeros := min(bits.TrailingZeros64(x)/8, 7) // 0 still prints one digit
	x = (x | 0x3030303030303030) >> (8 * zeros)
	n := len(dst)
	dst = slices.Grow(dst, 8)[:n+8]
	binary.LittleEndian.PutUint64(dst[n:], x)
	return dst[:n+8-zeros]
}

// pyPathJoin is os.path.join(dir, name) on POSIX for a relative name.
func pyPathJoin(dir, name string) string {
	if dir == "" || dir[len(dir)-1] == '/' {
		return dir + name
	}
	return dir + "/" + name
}

// appendPyJSONString quotes s as Python's json.dumps(..., ensure_ascii=False)
// does: only '"', '\\' and control characters are escaped, short forms for
// \b \f \n \r \t, lowercase \u00xx otherwise; everything else, non-ASCII
// included, is written as is.
func appendPyJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\b':
			dst = append(dst, '\\', 'b')
		case c == '\f':
			dst = append(dst, '\\', 'f')
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		case c >= utf8.RuneSelf:
			// Non-ASCII passes through; invalid UTF-8 cannot come from a
			// Python str, so it is replaced as Python would have failed.
			r, size := utf8.DecodeRuneInString(s[i:])
			dst = utf8.AppendRune(dst, r)
			i += size - 1
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

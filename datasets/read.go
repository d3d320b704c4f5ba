package datasets

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
)

// Reader reads a dataset request by request: trtllm-bench's line format
// (one JSON object per line with task_id, input_ids or logits,
// output_tokens and an optional lora_request), or the older single-object
// file {"metadata": {...}, "samples": [{"input_len", "input_ids",
// "output_len", "task_id"}]}, told apart by the first key. Lines are parsed
// by hand: a dataset of millions of token ids reads many times faster than
// through encoding/json, in memory bounded by the longest line.
type Reader struct {
	// Vocab, when positive, makes Next reject token ids outside [0, Vocab),
	// naming the file and line.
	Vocab int

	name    string
	br      *bufio.Reader
	line    int
	buf     []byte
	ids     []int32
	started bool
	legacy  *legacyReader
}

// NewReader reads from r; name (usually the file's path) prefixes errors.
func NewReader(r io.Reader, name string) *Reader {
	return &Reader{name: name, br: bufio.NewReaderSize(r, 1<<20)}
}

// Next reads the next request into req, reusing req.InputIDs' storage. It
// returns io.EOF after the last request and an *Error for bad input.
func (r *Reader) Next(req *Request) error {
	if !r.started {
		r.started = true
		legacy, err := r.sniffLegacy()
		if err != nil {
			return err
		}
		if legacy {
			if r.legacy, err = r.readLegacy(); err != nil {
				return err
			}
		}
	}
	if r.legacy != nil {
		return r.legacy.next(r, req)
	}
	for {
		line, err := r.readLine()
		if err != nil {
			if err == io.EOF {
				return io.EOF
			}
			return &Error{File: r.name, Line: r.line + 1, Msg: err.Error()}
		}
		r.line++
		if len(bytes.TrimSpace(line)) == 0 {
			continue // blank lines carry no request
		}
		p := lineParser{b: line, ids: r.ids[:0]}
		if err := p.parse(req); err != nil {
			return &Error{File: r.name, Line: r.line, Msg: err.Error()}
		}
		r.ids = p.ids
		if err := r.checkIDs(p.ids); err != nil {
			return &Error{File: r.name, Line: r.line, Msg: err.Error()}
		}
		req.InputIDs = append(req.InputIDs[:0], p.ids...)
		return nil
	}
}

func (r *Reader) checkIDs(ids []int32) error {
	if r.Vocab > 0 {
		tmp := Request{InputIDs: ids}
		return tmp.CheckVocab(r.Vocab)
	}
	return nil
}

// readLine returns the next line, newline included; the last line may lack
// one. The slice is valid until the next call.
func (r *Reader) readLine() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		r.buf = append(r.buf[:0], line...)
		for err == bufio.ErrBufferFull {
			line, err = r.br.ReadSlice('\n')
			r.buf = append(r.buf, line...)
		}
		line = r.buf
	}
	if err == io.EOF && len(line) > 0 {
		err = nil
	}
	return line, err
}

// sniffLegacy reports whether the input is the older single-object file: an
// object whose first key is "metadata" or "samples".
func (r *Reader) sniffLegacy() (bool, error) {
	for n := 64; ; n *= 2 {
		b, err := r.br.Peek(n)
		p := lineParser{b: b}
		p.ws()
		if p.i < len(b) && b[p.i] != '{' {
			return false, nil
		}
		p.i++
		p.ws()
		if p.i < len(b) && b[p.i] != '"' {
			return false, nil
		}
		if p.i < len(b) {
			end := bytes.IndexByte(b[p.i+1:], '"')
			if end >= 0 {
				key := string(b[p.i+1 : p.i+1+end])
				return key == "metadata" || key == "samples", nil
			}
		}
		if err != nil || n >= 1<<20 {
			return false, nil // short input: the line parser reports it
		}
	}
}

// ReadFile reads a whole dataset file (either format).
func ReadFile(path string) ([]Request, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{File: path, Msg: fmt.Sprintf("cannot read dataset: %v", errors.Unwrap(err))}
	}
	defer f.Close()
	return ReadAll(NewReader(f, path))
}

// ReadAll reads every remaining request of r.
func ReadAll(r *Reader) ([]Request, error) {
	var out []Request
	for {
		var req Request
		err := r.Next(&req)
		if err == io.EOF {
			if len(out) == 0 {
				return nil, &Error{File: r.name, Msg: "dataset has no requests"}
			}
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if req.LoRATaskID != nil {
			id := *req.LoRATaskID
			req.LoRATaskID = &id
		}
		out = append(out, req)
	}
}

// Stats summarises a dataset.
type Stats struct {
	Requests                  int
	InputTokens, OutputTokens int64
	MaxInput, MaxOutput       int
	// Longest is the request with the most input plus output tokens:
	// its line in the file (0 in the legacy single-object format) and
	// lengths, what a model's positions must hold.
	Longest Longest
}

// Longest locates a dataset's longest request.
type Longest struct {
	Line, Input, Output int
}

// CheckFile reads a dataset file through, checking every line (and, when
// vocab > 0, every token id against the vocabulary), in memory bounded by
// the longest request. It is how a user-supplied --dataset is validated.
func CheckFile(path string, vocab int) (Stats, error) {
	var st Stats
	f, err := os.Open(path)
	if err != nil {
		return st, &Error{File: path, Msg: fmt.Sprintf("cannot read dataset: %v", errors.Unwrap(err))}
	}
	defer f.Close()
	r := NewReader(f, path)
	r.Vocab = vocab
	var req Request
	for {
		err := r.Next(&req)
		if err == io.EOF {
			break
		}
		if err != nil {
			return st, err
		}
		st.Requests++
		st.InputTokens += int64(len(req.InputIDs))
		st.OutputTokens += int64(req.OutputTokens)
		st.MaxInput = max(st.MaxInput, len(req.InputIDs))
		st.MaxOutput = max(st.MaxOutput, req.OutputTokens)
		if n := len(req.InputIDs) + req.OutputTokens; n > st.Longest.Input+st.Longest.Output {
			st.Longest = Longest{Line: r.line, Input: len(req.InputIDs), Output: req.OutputTokens}
			if r.legacy != nil {
				st.Longest.Line = 0
			}
		}
	}
	if st.Requests == 0 {
		return st, &Error{File: path, Msg: "dataset has no requests"}
	}
	return st, nil
}

// promptOnlyMsg explains the one thing trtllm-bench accepts that xrun cannot.
const promptOnlyMsg = `has a "prompt" but no "input_ids": text prompts need the model's tokenizer, which xrun does not have; give token ids (e.g. from trtllm-bench prepare-dataset or xrun dataset)`

// lineParser parses one line-format object. It accepts any valid JSON object
// (whitespace, key order, unknown keys, escapes) and keeps the last value of
// a repeated key, as Python's json does.
type lineParser struct {
	b   []byte
	i   int
	ids []int32
}

func (p *lineParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\r', '\n':
			p.i++
		default:
			return
		}
	}
}

// errAt describes what was found at the current position.
func (p *lineParser) errAt(want string) error {
	if p.i >= len(p.b) {
		return fmt.Errorf("want %s, got the end of the line (truncated?)", want)
	}
	return fmt.Errorf("column %d: want %s, got %s", p.i+1, want, describe(p.b[p.i]))
}

func describe(c byte) string {
	switch {
	case c == '"':
		return "a string"
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == '-' || (c >= '0' && c <= '9'):
		return "a number"
	case c >= 0x20 && c < 0x7f:
		return strconv.QuoteRune(rune(c))
	default:
		return fmt.Sprintf("byte 0x%02x", c)
	}
}

func (p *lineParser) parse(req *Request) error {
	p.ws()
	if p.i >= len(p.b) || p.b[p.i] != '{' {
		return p.errAt("a JSON object '{'")
	}
	p.i++
	var (
		haveTask, haveOut, haveIDs, haveLogits, havePrompt bool
		logits                                             []int32
		lora                                               *int
	)
	*req = Request{InputIDs: req.InputIDs}
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
	} else {
		for {
			key, err := p.key("a key string")
			if err != nil {
				return err
			}
			switch string(key) {
			case "task_id":
				v, err := p.integer("task_id")
				if err != nil {
					return err
				}
				req.TaskID, haveTask = int(v), true
			case "output_tokens":
				v, err := p.integer("output_tokens")
				if err != nil {
					return err
				}
				if v < 1 || v > MaxTokens {
					return fmt.Errorf(`"output_tokens" must be in [1, %d], got %d`, MaxTokens, v)
				}
				req.OutputTokens, haveOut = int(v), true
			case "input_ids":
				if p.null() {
					haveIDs = false
					break
				}
				if p.ids, err = p.intArray("input_ids", p.ids[:0]); err != nil {
					return err
				}
				haveIDs = true
			case "logits":
				if p.null() {
					haveLogits = false
					break
				}
				if logits, err = p.intArray("logits", logits[:0]); err != nil {
					return err
				}
				haveLogits = true
			case "lora_request":
				if lora, err = p.loraRequest(); err != nil {
					return err
				}
			case "prompt":
				havePrompt = !p.null()
				if err := p.skip(0); err != nil {
					return err
				}
			default:
				if err := p.skip(0); err != nil {
					return err
				}
			}
			p.ws()
			if p.i >= len(p.b) {
				return p.errAt("',' or '}'")
			}
			if p.b[p.i] == '}' {
				p.i++
				break
			}
			if p.b[p.i] != ',' {
				return p.errAt("',' or '}'")
			}
			p.i++
		}
	}
	p.ws()
	if p.i < len(p.b) {
		return fmt.Errorf("column %d: found %s after the end of the object (one request per line)", p.i+1, describe(p.b[p.i]))
	}
	// trtllm-bench: data.get("input_ids", data.get("logits")), else tokenize
	// the prompt.
	if !haveIDs && haveLogits {
		p.ids, haveIDs = logits, true
	}
	switch {
	case !haveIDs && havePrompt:
		return errors.New(promptOnlyMsg)
	case !haveIDs:
		return errors.New(`missing "input_ids"`)
	case len(p.ids) == 0:
		return errors.New(`"input_ids" is empty`)
	case len(p.ids) > MaxTokens:
		return fmt.Errorf(`"input_ids" has %d tokens, more than %d`, len(p.ids), MaxTokens)
	case !haveTask:
		return errors.New(`missing "task_id"`)
	case !haveOut:
		return errors.New(`missing "output_tokens"`)
	}
	req.LoRATaskID = lora
	return nil
}

// key parses an object key and the colon after it, with the whitespace
// around both, leaving the parser at the value.
func (p *lineParser) key(what string) ([]byte, error) {
	p.ws()
	k, err := p.str(what)
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.i >= len(p.b) || p.b[p.i] != ':' {
		return nil, p.errAt("':' after key")
	}
	p.i++
	p.ws()
	return k, nil
}

// null consumes a JSON null if one is next.
func (p *lineParser) null() bool {
	if bytes.HasPrefix(p.b[p.i:], []byte("null")) {
		p.i += 4
		return true
	}
	return false
}

// str parses a string and returns its unescaped bytes (aliasing the line
// when it has no escapes).
func (p *lineParser) str(what string) ([]byte, error) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return nil, p.errAt(what)
	}
	p.i++
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return p.b[start : p.i-1], nil
		case c == '\\':
			return p.strEscaped(start)
		case c < 0x20:
			return nil, fmt.Errorf("column %d: control character 0x%02x inside a string", p.i+1, c)
		}
		p.i++
	}
	return nil, errors.New("unterminated string at the end of the line (truncated?)")
}

func (p *lineParser) strEscaped(start int) ([]byte, error) {
	out := append([]byte(nil), p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return out, nil
		case c < 0x20:
			return nil, fmt.Errorf("column %d: control character 0x%02x inside a string", p.i+1, c)
		case c != '\\':
			out = append(out, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.b) {
			break
		}
		e := p.b[p.i+1]
		p.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if p.i+4 > len(p.b) {
				return nil, errors.New(`unterminated \u escape at the end of the line (truncated?)`)
			}
			v, err := strconv.ParseUint(string(p.b[p.i:p.i+4]), 16, 16)
			if err != nil {
				return nil, fmt.Errorf(`column %d: bad \u escape %q`, p.i-1, p.b[p.i-2:p.i+4])
			}
			// Keys only need to compare equal; surrogate pairs are kept
			// as their UTF-8-encoded halves' replacement.
			out = fmt.Appendf(out, "%c", rune(v))
			p.i += 4
		default:
			return nil, fmt.Errorf("column %d: bad escape \\%c", p.i-1, e)
		}
	}
	return nil, errors.New("unterminated string at the end of the line (truncated?)")
}

// integer parses a JSON number that must be an integer.
func (p *lineParser) integer(key string) (int64, error) {
	start := p.i
	neg := false
	if p.i < len(p.b) && p.b[p.i] == '-' {
		neg = true
		p.i++
	}
	if p.i >= len(p.b) || p.b[p.i] < '0' || p.b[p.i] > '9' {
		p.i = start
		return 0, p.errAt(fmt.Sprintf("an integer for %q", key))
	}
	var v uint64
	digits := 0
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		if digits == 1 && v == 0 {
			return 0, fmt.Errorf("column %d: %q: leading zero in a number", start+1, key)
		}
		v = v*10 + uint64(p.b[p.i]-'0')
		digits++
		p.i++
		if digits > 18 {
			return 0, fmt.Errorf("column %d: %q: integer out of range", start+1, key)
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		return 0, fmt.Errorf("column %d: %q: want an integer, got %s", start+1, key, p.numberText(start))
	}
	if neg {
		return -int64(v), nil
	}
	return int64(v), nil
}

// numberText returns the whole number starting at start, for messages.
func (p *lineParser) numberText(start int) string {
	end := start
	for end < len(p.b) && bytes.IndexByte([]byte("+-0123456789.eE"), p.b[end]) >= 0 {
		end++
	}
	return string(p.b[start:end])
}

// intArray parses an array of token ids into dst; it is the hot loop of
// reading a dataset.
func (p *lineParser) intArray(key string, dst []int32) ([]int32, error) {
	if p.i >= len(p.b) || p.b[p.i] != '[' {
		return dst, p.errAt(fmt.Sprintf("an array of token ids for %q", key))
	}
	p.i++
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return dst, nil
	}
	b := p.b
	for {
		// Fast path: plain non-negative decimal digits.
		i := p.i
		var v uint64
		for i < len(b) && b[i] >= '0' && b[i] <= '9' && i-p.i < 11 {
			v = v*10 + uint64(b[i]-'0')
			i++
		}
		n := i - p.i
		switch {
		case n == 0, n > 10, n > 1 && b[p.i] == '0',
			i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E' || (b[i] >= '0' && b[i] <= '9')):
			return dst, p.badElement(key, len(dst))
		case v > math.MaxInt32:
			return dst, fmt.Errorf("column %d: %s[%d] = %d is not a token id (above %d)", p.i+1, key, len(dst), v, math.MaxInt32)
		}
		dst = append(dst, int32(v))
		p.i = i
		if p.i < len(b) && b[p.i] == ',' {
			p.i++
			if p.i < len(b) && b[p.i] >= '0' && b[p.i] <= '9' {
				continue
			}
			p.ws()
			continue
		}
		p.ws()
		if p.i < len(b) && b[p.i] == ']' {
			p.i++
			return dst, nil
		}
		if p.i < len(b) && b[p.i] == ',' {
			p.i++
			p.ws()
			continue
		}
		return dst, p.errAt(fmt.Sprintf("',' or ']' after %s[%d]", key, len(dst)-1))
	}
}

// badElement explains why the element at the current position is not a
// token id.
func (p *lineParser) badElement(key string, idx int) error {
	if p.i >= len(p.b) {
		return p.errAt(fmt.Sprintf("%s[%d]", key, idx))
	}
	c := p.b[p.i]
	if c == '-' || (c >= '0' && c <= '9') {
		return fmt.Errorf("column %d: %s[%d] = %s is not a token id (want a non-negative integer)", p.i+1, key, idx, p.numberText(p.i))
	}
	return fmt.Errorf("column %d: %s[%d]: want a token id, got %s", p.i+1, key, idx, describe(c))
}

// loraRequest parses lora_request: null, or an object whose lora_int_id is
// the task id; its name and path are not needed by xrun.
func (p *lineParser) loraRequest() (*int, error) {
	if p.null() {
		return nil, nil
	}
	if p.i >= len(p.b) || p.b[p.i] != '{' {
		return nil, p.errAt(`an object or null for "lora_request"`)
	}
	p.i++
	var id *int
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return nil, errors.New(`"lora_request" has no "lora_int_id"`)
	}
	for {
		key, err := p.key(`a key string in "lora_request"`)
		if err != nil {
			return nil, err
		}
		if string(key) == "lora_int_id" {
			v, err := p.integer("lora_int_id")
			if err != nil {
				return nil, err
			}
			if v < math.MinInt32 || v > math.MaxInt32 {
				return nil, fmt.Errorf(`"lora_int_id" %d is out of range`, v)
			}
			n := int(v)
			id = &n
		} else if err := p.skip(1); err != nil {
			return nil, err
		}
		p.ws()
		if p.i < len(p.b) && p.b[p.i] == '}' {
			p.i++
			break
		}
		if p.i >= len(p.b) || p.b[p.i] != ',' {
			return nil, p.errAt(`',' or '}' in "lora_request"`)
		}
		p.i++
	}
	if id == nil {
		return nil, errors.New(`"lora_request" has no "lora_int_id"`)
	}
	return id, nil
}

// maxDepth bounds nesting in skipped values (Python's json stops near 1000).
const maxDepth = 512

// skip consumes one JSON value of any kind.
func (p *lineParser) skip(depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("column %d: nested deeper than %d levels", p.i+1, maxDepth)
	}
	if p.i >= len(p.b) {
		return p.errAt("a value")
	}
	switch c := p.b[p.i]; {
	case c == '"':
		_, err := p.str("a string")
		return err
	case c == '{' || c == '[':
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		p.i++
		p.ws()
		if p.i < len(p.b) && p.b[p.i] == closer {
			p.i++
			return nil
		}
		for {
			if c == '{' {
				if _, err := p.key("a key string"); err != nil {
					return err
				}
			}
			p.ws()
			if err := p.skip(depth + 1); err != nil {
				return err
			}
			p.ws()
			if p.i < len(p.b) && p.b[p.i] == closer {
				p.i++
				return nil
			}
			if p.i >= len(p.b) || p.b[p.i] != ',' {
				return p.errAt(fmt.Sprintf("',' or '%c'", closer))
			}
			p.i++
		}
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	default:
		return p.errAt("a value")
	}
}

func (p *lineParser) literal(word string) error {
	if !bytes.HasPrefix(p.b[p.i:], []byte(word)) {
		return p.errAt("a value")
	}
	p.i += len(word)
	return nil
}

// number consumes a JSON number of any form.
func (p *lineParser) number() error {
	start := p.i
	digits := func() int {
		n := 0
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.b[p.i] == '-' {
		p.i++
	}
	intStart := p.i
	if n := digits(); n == 0 || (n > 1 && p.b[intStart] == '0') {
		return fmt.Errorf("column %d: malformed number %q", start+1, p.numberText(start))
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return fmt.Errorf("column %d: malformed number %q", start+1, p.numberText(start))
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return fmt.Errorf("column %d: malformed number %q", start+1, p.numberText(start))
		}
	}
	return nil
}

// legacyReader serves the requests of an older single-object file, decoded
// at once (that format is one JSON document).
type legacyReader struct {
	samples []legacySample
	pos     int
}

type legacySample struct {
	InputLen  *int64   `json:"input_len"`
	InputIDs  *[]int64 `json:"input_ids"`
	OutputLen *int64   `json:"output_len"`
	TaskID    *int64   `json:"task_id"`
	Prompt    *string  `json:"prompt"`
}

func (r *Reader) readLegacy() (*legacyReader, error) {
	data, err := io.ReadAll(r.br)
	if err != nil {
		return nil, &Error{File: r.name, Msg: err.Error()}
	}
	var doc struct {
		Samples *[]legacySample `json:"samples"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		line, msg := 0, err.Error()
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			line = 1 + bytes.Count(data[:min(int(se.Offset), len(data))], []byte("\n"))
		case errors.As(err, &te):
			line = 1 + bytes.Count(data[:min(int(te.Offset), len(data))], []byte("\n"))
			msg = fmt.Sprintf("%s: want %s, got a JSON %s", te.Field, te.Type, te.Value)
		}
		return nil, &Error{File: r.name, Line: line, Msg: msg}
	}
	if doc.Samples == nil {
		return nil, &Error{File: r.name, Msg: `has "metadata" but no "samples"`}
	}
	return &legacyReader{samples: *doc.Samples}, nil
}

// next converts one sample. In this format task_id is the LoRA task (-1 for
// none), so the request's TaskID is its index.
func (l *legacyReader) next(r *Reader, req *Request) error {
	if l.pos >= len(l.samples) {
		return io.EOF
	}
	i := l.pos
	s := l.samples[i]
	l.pos++
	fail := func(format string, args ...any) error {
		return &Error{File: r.name, Msg: fmt.Sprintf("samples[%d]: ", i) + fmt.Sprintf(format, args...)}
	}
	switch {
	case s.InputIDs == nil && s.Prompt != nil:
		return fail("%s", promptOnlyMsg)
	case s.InputIDs == nil:
		return fail(`missing "input_ids"`)
	case len(*s.InputIDs) == 0:
		return fail(`"input_ids" is empty`)
	case s.OutputLen == nil:
		return fail(`missing "output_len"`)
	case *s.OutputLen < 1 || *s.OutputLen > MaxTokens:
		return fail(`"output_len" must be in [1, %d], got %d`, MaxTokens, *s.OutputLen)
	case s.InputLen != nil && *s.InputLen != int64(len(*s.InputIDs)):
		return fail(`"input_len" is %d but "input_ids" has %d tokens`, *s.InputLen, len(*s.InputIDs))
	}
	ids := req.InputIDs[:0]
	for j, t := range *s.InputIDs {
		if t < 0 || t > math.MaxInt32 {
			return fail("input_ids[%d] = %d is not a token id", j, t)
		}
		ids = append(ids, int32(t))
	}
	if err := r.checkIDs(ids); err != nil {
		return fail("%v", err)
	}
	*req = Request{TaskID: i, InputIDs: ids, OutputTokens: int(*s.OutputLen)}
	if s.TaskID != nil && *s.TaskID != -1 {
		id := int(*s.TaskID)
		req.LoRATaskID = &id
	}
	return nil
}

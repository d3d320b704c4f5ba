package openai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Client sends streamed requests to an OpenAI-compatible server and
// times them on its own clock.
type Client struct {
	// BaseURL is the API's root, with /v1 (http://host:8000/v1).
	BaseURL string
	Model   string
	APIKey  string
	// Chat sends /v1/chat/completions with the prompt as one user
	// message of decimal token ids; else /v1/completions with the ids.
	Chat bool
	HTTP *http.Client
}

// Timing is one streamed request as the client saw it.
type Timing struct {
	// Start is when the request was sent, End when its stream ended.
	Start, End time.Time
	// Chunks are when each chunk carrying output arrived (a chunk may
	// carry several tokens).
	Chunks []time.Time
	// OutputTokens are the tokens generated: the server's usage, else
	// the token ids its chunks carried, else one per chunk (Counted says
	// which).
	OutputTokens int
	Counted      string
}

// RequestError is a request the server did not complete.
type RequestError struct {
	// Status is the HTTP status (0: no response).
	Status int
	Msg    string
}

func (e *RequestError) Error() string {
	if e.Status == 0 {
		return e.Msg
	}
	return fmt.Sprintf("the server answered %d %s: %s", e.Status, http.StatusText(e.Status), e.Msg)
}

// body is the request for a prompt of ids and exactly maxTokens tokens.
func (c *Client) body(ids []int32, maxTokens int) ([]byte, string) {
	so := &StreamOptions{IncludeUsage: true}
	zero := 0.0
	if c.Chat {
		content, _ := json.Marshal(strings.TrimSpace(TokenText(ids)))
		return mustJSON(ChatRequest{Model: c.Model, Messages: []ChatMessage{{Role: "user", Content: content}}, MaxTokens: &maxTokens,
			MinTokens: maxTokens, IgnoreEOS: true, Stream: true, StreamOptions: so, Temperature: &zero}), "/chat/completions"
	}
	prompt, _ := json.Marshal(ids)
	return mustJSON(CompletionRequest{Model: c.Model, Prompt: prompt, MaxTokens: &maxTokens, MinTokens: maxTokens, IgnoreEOS: true,
		Stream: true, StreamOptions: so, Temperature: &zero}), "/completions"
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs of numbers and strings
	}
	return b
}

// Do sends one request and reads its stream to the end.
func (c *Client) Do(ctx context.Context, ids []int32, maxTokens int) (*Timing, error) {
	body, path := c.body(ids, maxTokens)
	url := strings.TrimRight(c.BaseURL, "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, &RequestError{Msg: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	t := &Timing{Start: time.Now()}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, &RequestError{Msg: transportError(err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, &RequestError{Status: resp.StatusCode, Msg: errorMessage(resp.Body)}
	}
	if err := readStream(resp.Body, t, time.Now); err != nil {
		return nil, err
	}
	return t, nil
}

// readStream reads a completion's server-sent events into t, timing each
// chunk with output by now, and counts the tokens (Timing.OutputTokens).
func readStream(r io.Reader, t *Timing, now func() time.Time) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	var usage *Usage
	ids2, finished, done := 0, false, false
	for sc.Scan() {
		line := sc.Bytes()
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue // comments, event names, blank separators
		}
		data = bytes.TrimSpace(data)
		if string(data) == "[DONE]" {
			done = true
			break
		}
		at := now()
		var chunk struct {
			Response
			Error *ErrorDetail `json:"error"`
		}
		if err := json.Unmarshal(data, &chunk); err != nil {
			return &RequestError{Msg: fmt.Sprintf("a stream chunk is not JSON (%v): %s", err, clip(string(data), 200))}
		}
		if chunk.Error != nil {
			return &RequestError{Msg: "the stream ended with an error: " + chunk.Error.Message}
		}
		if chunk.Usage != nil {
			usage = chunk.Usage
		}
		for _, ch := range chunk.Choices {
			out := len(ch.TokenIDs) > 0 || ch.Text != nil && *ch.Text != "" || ch.Delta != nil && ch.Delta.Content != ""
			if out {
				t.Chunks = append(t.Chunks, at)
				ids2 += len(ch.TokenIDs)
			}
			if ch.FinishReason != nil && *ch.FinishReason != "" {
				finished = true
			}
		}
	}
	t.End = now()
	if err := sc.Err(); err != nil {
		return &RequestError{Msg: fmt.Sprintf("reading the stream after %d chunks: %s", len(t.Chunks), transportError(err))}
	}
	if !done && !finished {
		return &RequestError{Msg: fmt.Sprintf("the stream ended after %d chunks without finishing (no finish_reason, no [DONE]): the server closed the connection", len(t.Chunks))}
	}
	switch {
	case usage != nil:
		t.OutputTokens, t.Counted = usage.CompletionTokens, "usage"
	case ids2 > 0:
		t.OutputTokens, t.Counted = ids2, "token_ids"
	default:
		t.OutputTokens, t.Counted = len(t.Chunks), "chunks"
	}
	return nil
}

// errorMessage reads an error response: OpenAI's error object, or the
// text.
func errorMessage(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, 64<<10))
	var eb ErrorBody
	if json.Unmarshal(b, &eb) == nil && eb.Error.Message != "" {
		return eb.Error.Message
	}
	// FastAPI's {"detail": ...} and others.
	var d struct {
		Detail  any    `json:"detail"`
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &d) == nil {
		if d.Message != "" {
			return d.Message
		}
		if d.Detail != nil {
			return fmt.Sprint(d.Detail)
		}
	}
	if s := strings.TrimSpace(string(b)); s != "" {
		return clip(s, 600)
	}
	return "(no body)"
}

// transportError says what went wrong below HTTP, plainly.
func transportError(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	}
	s := err.Error()
	if strings.Contains(s, "connection refused") {
		return s + " (is the server running and listening there?)"
	}
	return s
}

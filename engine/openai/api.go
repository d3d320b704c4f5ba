package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// CompletionRequest is the body of POST /v1/completions, as far as xrun
// reads or writes it. Fields it does not know are ignored when serving.
type CompletionRequest struct {
	Model string `json:"model"`
	// Prompt is token ids; a string is refused by xrun serve.
	Prompt        json.RawMessage `json:"prompt"`
	MaxTokens     *int            `json:"max_tokens,omitempty"`
	MinTokens     int             `json:"min_tokens,omitempty"`
	IgnoreEOS     bool            `json:"ignore_eos,omitempty"`
	Stream        bool            `json:"stream,omitempty"`
	StreamOptions *StreamOptions  `json:"stream_options,omitempty"`
	Temperature   *float64        `json:"temperature,omitempty"`
	N             *int            `json:"n,omitempty"`
}

// StreamOptions are a streaming request's options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// ChatRequest is the body of POST /v1/chat/completions.
type ChatRequest struct {
	Model               string         `json:"model"`
	Messages            []ChatMessage  `json:"messages"`
	MaxTokens           *int           `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int           `json:"max_completion_tokens,omitempty"`
	MinTokens           int            `json:"min_tokens,omitempty"`
	IgnoreEOS           bool           `json:"ignore_eos,omitempty"`
	Stream              bool           `json:"stream,omitempty"`
	StreamOptions       *StreamOptions `json:"stream_options,omitempty"`
	Temperature         *float64       `json:"temperature,omitempty"`
	N                   *int           `json:"n,omitempty"`
}

// ChatMessage is one message; Content is token ids (see the package
// documentation).
type ChatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// Usage counts a request's tokens.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Choice is one completion (or its chunk).
type Choice struct {
	Index        int          `json:"index"`
	Text         *string      `json:"text,omitempty"`
	Message      *ChatContent `json:"message,omitempty"`
	Delta        *ChatContent `json:"delta,omitempty"`
	TokenIDs     []int32      `json:"token_ids,omitempty"`
	FinishReason *string      `json:"finish_reason"`
}

// ChatContent is a chat message or delta in a response.
type ChatContent struct {
	Role    string `json:"role,omitempty"`
	Content string `json:"content"`
}

// Response is a completion, or one chunk of a stream.
type Response struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []Choice `json:"choices"`
	Usage   *Usage   `json:"usage,omitempty"`
}

// ErrorBody is an OpenAI error response.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong.
type ErrorDetail struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   string `json:"param,omitempty"`
	Code    int    `json:"code,omitempty"`
}

// Model is one entry of GET /v1/models.
type Model struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	MaxModelLen int    `json:"max_model_len,omitempty"`
}

// ModelList is GET /v1/models.
type ModelList struct {
	Object string  `json:"object"`
	Data   []Model `json:"data"`
}

// TokenText writes token ids as xrun serve's text: each id in decimal
// after a space.
func TokenText(ids []int32) string {
	var b strings.Builder
	for _, id := range ids {
		b.WriteByte(' ')
		b.WriteString(strconv.Itoa(int(id)))
	}
	return b.String()
}

// ParseTokenIDs reads a prompt or message content given as token ids: a
// JSON array of integers, or (asText) a string of decimal ids separated
// by spaces, as TokenText writes them. The message says what was
// expected.
func ParseTokenIDs(raw json.RawMessage, asText bool) ([]int32, string) {
	raw = bytes.TrimSpace(raw)
	const what = "token ids: an array of integers such as [1, 2, 3]"
	if len(raw) == 0 || string(raw) == "null" {
		return nil, "missing; expected " + what
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, "not a JSON string: " + err.Error()
		}
		if !asText {
			return nil, "text, but xrun serve has no tokenizer; send " + what
		}
		var ids []int32
		for _, f := range strings.Fields(s) {
			v, err := strconv.ParseInt(f, 10, 32)
			if err != nil {
				return nil, fmt.Sprintf("%q is not a token id: xrun serve has no tokenizer, so text content must be decimal token ids separated by spaces (or send %s)", clip(f, 40), what)
			}
			ids = append(ids, int32(v))
		}
		return ids, ""
	case '[':
		var ids []int32
		if err := json.Unmarshal(raw, &ids); err != nil {
			var nested [][]int32
			if json.Unmarshal(raw, &nested) == nil {
				return nil, "several prompts in one request; send one prompt per request"
			}
			var strs []string
			if json.Unmarshal(raw, &strs) == nil {
				return nil, "text, but xrun serve has no tokenizer; send " + what
			}
			return nil, "expected " + what + " (" + err.Error() + ")"
		}
		return ids, ""
	}
	return nil, "expected " + what
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

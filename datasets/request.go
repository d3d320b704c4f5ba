package datasets

import (
	"fmt"
	"strconv"
)

// Request is one benchmark request as trtllm-bench reads it.
type Request struct {
	// TaskID is the request's index in the dataset (trtllm-bench's task_id).
	TaskID int
	// InputIDs are the prompt's token ids.
	InputIDs []int32
	// OutputTokens is how many tokens the request generates.
	OutputTokens int
	// LoRATaskID is the LoRA adapter's task id (lora_request.lora_int_id);
	// nil when the request uses no adapter.
	LoRATaskID *int
}

// Error is a problem with a dataset file: File and Line locate it (Line is 0
// when the whole file is at fault), Msg says what is wrong.
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return e.File + ":" + strconv.Itoa(e.Line) + ": " + e.Msg
	}
	return e.File + ": " + e.Msg
}

// BadInput marks dataset errors as the user's input (exit status 2).
func (e *Error) BadInput() bool { return true }

// CheckVocab reports the first token id outside [0, vocab).
func (r *Request) CheckVocab(vocab int) error {
	for i, t := range r.InputIDs {
		if t < 0 || int(t) >= vocab {
			return fmt.Errorf("input_ids[%d] = %d is outside the model's vocabulary [0, %d)", i, t, vocab)
		}
	}
	return nil
}

// CheckVocab checks every request's token ids against the model's
// vocabulary size; the error names the request and the offending id.
func CheckVocab(reqs []Request, vocab int) error {
	for i := range reqs {
		if err := reqs[i].CheckVocab(vocab); err != nil {
			return &Error{File: "dataset", Msg: fmt.Sprintf("request %d (task_id %d): %v", i, reqs[i].TaskID, err)}
		}
	}
	return nil
}

package retry

import (
	"errors"
	"fmt"
)

// ErrInvalidPolicy is matched by every violation [Policy.Validate] reports.
var ErrInvalidPolicy = errors.New("invalid retry policy")

// ErrExhausted is matched by an [*ExhaustedError].
var ErrExhausted = errors.New("retries exhausted")

// ExhaustedError reports that every attempt failed with a transient error.
// It unwraps to the last error, so errors.Is and errors.As still see it.
type ExhaustedError struct {
	Attempts int   // how many times the operation was called
	Err      error // the error from the last attempt
}

// Error returns the attempt count followed by the last error.
func (e *ExhaustedError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("gave up after %d attempts", e.Attempts)
	}
	return fmt.Sprintf("gave up after %d attempts: %v", e.Attempts, e.Err)
}

// Unwrap returns the error from the last attempt.
func (e *ExhaustedError) Unwrap() error { return e.Err }

// Is reports whether target is [ErrExhausted].
func (e *ExhaustedError) Is(target error) bool { return target == ErrExhausted }

// policyError is one violation found by Validate.
type policyError struct{ msg string }

func invalidf(format string, args ...any) error {
	return &policyError{msg: fmt.Sprintf(format, args...)}
}

func (e *policyError) Error() string { return e.msg }

func (e *policyError) Is(target error) bool { return target == ErrInvalidPolicy }

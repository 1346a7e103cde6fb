package demo

import "errors"

// ErrConfig wraps every rejected configuration of a simulator.
var ErrConfig = errors.New("invalid demo configuration")

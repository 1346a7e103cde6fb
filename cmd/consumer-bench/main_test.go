package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestUsage(t *testing.T) {
	tests := []struct {
		name     string
		give     []string
		wantCode int
		wantOut  []string // on stdout
		wantErr  []string // on stderr
	}{
		{"--help", []string{"--help"}, exitOK, []string{
			"usage: consumer-bench [flags]", "--n int", "(default 200000)", "--scenario string", "(default all)",
			"--pulls string", "(default 32,64,128,256)",
			"--replicas string", "(default 1,4,16)", "--consumer-binary string", "--smoke",
			"--json", "--cpuprofile string", "overhead, storm, steady, engines, process",
			"--engines-n int", "(default 3000)", "--engines-policies string", "(default production,short)",
			"--process-n int", "(default 50000)", "--process-rounds int", "(default 3)", "--nats-server-binary string",
		}, nil},
		{"-h", []string{"-h"}, exitOK, []string{"usage: consumer-bench [flags]"}, nil},
		{"unknown flag", []string{"--frobnicate"}, exitBadUsage, nil, []string{"frobnicate", "consumer-bench --help"}},
		{"an argument", []string{"overhead"}, exitBadUsage, nil, []string{`unexpected argument "overhead"`}},
		{"bad scenario", []string{"--scenario", "nope"}, exitBadUsage, nil, []string{`consumer-bench: unknown scenario "nope"`}},
		{"bad pulls", []string{"--pulls", "32,x"}, exitBadUsage, nil, []string{`--pulls: "x" is not a number`}},
		{"bad replicas", []string{"--replicas", "0"}, exitBadUsage, nil, []string{"replicas 0 must be in [1, 64]"}},
		{"a removed scenario", []string{"--scenario", "capacity"}, exitBadUsage, nil, []string{`unknown scenario "capacity"`}},
		{"a removed flag", []string{"--memory-n", "5"}, exitBadUsage, nil, []string{"flag provided but not defined: -memory-n"}},
		{"bad engines n", []string{"--scenario", "engines", "--engines-n", "0"}, exitBadUsage, nil, []string{"engines n (0), capacity n (0) and rate (10) must be >= 1"}},
		{"unknown engines policy", []string{"--engines-policies", "production,fast"}, exitBadUsage, nil, []string{`--engines-policies: unknown policy "fast" (want one of production, short)`}},
		{"bad process rounds", []string{"--scenario", "process", "--process-rounds", "0"}, exitBadUsage, nil, []string{"process n (50000) and rounds (0) must be >= 1"}},
		{"the bare consumer without its flags", []string{"bare-consumer"}, exitFailure, nil, []string{"consumer-bench: bare-consumer: --nats-url"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(t.Context(), tt.give, &out, &errOut)
			assert.Equal(t, tt.wantCode, code, "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
			for _, want := range tt.wantOut {
				assert.Contains(t, out.String(), want)
			}
			for _, want := range tt.wantErr {
				assert.Contains(t, errOut.String(), want)
			}
			if tt.wantCode == exitOK {
				assert.Empty(t, errOut.String(), "help goes to stdout")
			} else {
				assert.Empty(t, out.String(), "errors go to stderr")
			}
		})
	}
}

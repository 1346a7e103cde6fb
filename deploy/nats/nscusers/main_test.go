package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The committed users.sh is what the generator writes from the committed
// permissions.conf: the permissions are written once.
func TestUsersScriptIsGeneratedFromTheConf(t *testing.T) {
	data, err := os.ReadFile("../permissions.conf")
	require.NoError(t, err)
	want, err := Script(data)
	require.NoError(t, err)
	got, err := os.ReadFile("../users.sh")
	require.NoError(t, err)
	assert.Equal(t, want, string(got), "deploy/nats/users.sh is stale: go generate ./deploy")
}

// What nsc cannot be given as written is refused, never dropped: a user
// left without --allow-pub would be granted every subject.
func TestScriptRefusesWhatItCannotWrite(t *testing.T) {
	tests := []struct {
		name string
		give string
	}{
		{"no account", `listen: "127.0.0.1:4222"`},
		{"no permissions", `accounts { A { users: [ { user: u, password: $U_PASSWORD } ] } }`},
		{"a deny list", `accounts { A { users: [ { user: u, permissions: { publish: { allow: ["a"], deny: ["b"] } } } ] } }`},
		{"publish as a bare list", `accounts { A { users: [ { user: u, permissions: { publish: ["a"] } } ] } }`},
		{"allow_responses", `accounts { A { users: [ { user: u, permissions: { publish: { allow: ["a"] }, allow_responses: true } } ] } }`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Script([]byte(tt.give))
			assert.Error(t, err)
		})
	}
}

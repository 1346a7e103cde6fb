// Command nscusers writes deploy/nats/users.sh, the nsc commands of
// operator mode, from deploy/nats/permissions.conf, so that the NATS
// permissions are written once: edit permissions.conf, then
//
//	go generate ./deploy
//
// (or go run ./deploy/nats/nscusers -o deploy/nats/users.sh
// deploy/nats/permissions.conf). main_test.go fails while the committed
// users.sh differs from what this writes.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/nats-io/nats-server/v2/conf"
)

func main() {
	out := flag.String("o", "", "write the script to this file instead of stdout")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: nscusers [-o users.sh] permissions.conf")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *out, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "nscusers:", err)
		os.Exit(1)
	}
}

func run(confPath, outPath string, stdout io.Writer) error {
	data, err := os.ReadFile(confPath)
	if err != nil {
		return err
	}
	script, err := Script(data)
	if err != nil {
		return fmt.Errorf("%s: %w", confPath, err)
	}
	if outPath == "" {
		_, err = io.WriteString(stdout, script)
		return err
	}
	return os.WriteFile(outPath, []byte(script), 0o755)
}

// user is one user of the account: its name, the comment above it in
// permissions.conf, and what it may publish and subscribe to, in order.
type user struct {
	name, comment string
	pub, sub      []string
}

var (
	// variableRe finds the $VARIABLES permissions.conf leaves to the
	// server's environment (the passwords); nsc has no use for them.
	variableRe = regexp.MustCompile(`\$([A-Z][A-Z0-9_]*)`)
	// commentRe finds the comment line just above a user's name.
	commentRe = regexp.MustCompile(`(?m)^\s*#\s*(.*)\n\s*user:\s*"?([^"\s]+)"?`)
)

// Script returns the nsc commands that make the account and users of the
// nats-server configuration conf, granting exactly its permissions.
func Script(data []byte) (string, error) {
	account, users, err := parse(data)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(`#!/bin/sh
# Generated from permissions.conf by deploy/nats/nscusers (go generate ./deploy): do not edit
# it, edit permissions.conf. The same account and users, for operator mode (nsc): the .creds
# the Deployment mounts.
set -eu
`)
	fmt.Fprintf(&b, "nsc add account %s\n", account)
	fmt.Fprintf(&b, "nsc edit account %s --js-disk-storage 20G   # JetStream for the account: size it for the streams and the bucket\n", account)
	for _, u := range users {
		if u.comment != "" {
			fmt.Fprintf(&b, "# %s\n", u.comment)
		}
		fmt.Fprintf(&b, "nsc add user --account %s --name %s", account, u.name)
		for _, s := range u.pub {
			fmt.Fprintf(&b, " \\\n  --allow-pub '%s'", s)
		}
		for _, s := range u.sub {
			fmt.Fprintf(&b, " \\\n  --allow-sub '%s'", s)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "nsc push --account %s                       # the account, with JetStream, to the server's resolver\n", account)
	for _, u := range users {
		fmt.Fprintf(&b, "nsc generate creds --account %s --name %s --output-file %s.creds\n", account, u.name, u.name)
	}
	return b.String(), nil
}

// parse reads the one account of the configuration and its users, as
// nats-server parses the file.
func parse(data []byte) (string, []user, error) {
	text := string(data)
	var vars strings.Builder
	for _, m := range variableRe.FindAllStringSubmatch(text, -1) {
		fmt.Fprintf(&vars, "%s: \"\"\n", m[1])
	}
	m, err := conf.Parse(vars.String() + text)
	if err != nil {
		return "", nil, err
	}
	accounts, ok := m["accounts"].(map[string]any)
	if !ok || len(accounts) != 1 {
		return "", nil, errors.New("want exactly one account under accounts")
	}
	var name string
	var acc map[string]any
	for k, v := range accounts {
		name, acc = k, v.(map[string]any)
	}
	comments := map[string]string{}
	for _, c := range commentRe.FindAllStringSubmatch(text, -1) {
		comments[c[2]] = c[1]
	}
	list, _ := acc["users"].([]any)
	if len(list) == 0 {
		return "", nil, fmt.Errorf("account %s has no users", name)
	}
	var users []user
	for _, item := range list {
		u, _ := item.(map[string]any)
		n, _ := u["user"].(string)
		if n == "" {
			return "", nil, fmt.Errorf("account %s: a user without a name", name)
		}
		perms, ok := u["permissions"].(map[string]any)
		if !ok {
			return "", nil, fmt.Errorf("user %s: no permissions block (nsc would grant it everything)", n)
		}
		for k := range perms {
			if k != "publish" && k != "subscribe" {
				return "", nil, fmt.Errorf("user %s: permissions.%s is not written as nsc flags", n, k)
			}
		}
		pub, err := allowed(perms, "publish")
		if err != nil {
			return "", nil, fmt.Errorf("user %s: %w", n, err)
		}
		sub, err := allowed(perms, "subscribe")
		if err != nil {
			return "", nil, fmt.Errorf("user %s: %w", n, err)
		}
		users = append(users, user{name: n, comment: comments[n], pub: pub, sub: sub})
	}
	return name, users, nil
}

// allowed returns the subjects of perms[kind].allow. Anything else there
// (a deny list, a permission nsc is not given here) is an error, not
// dropped: the script would grant more than the configuration does.
func allowed(perms map[string]any, kind string) ([]string, error) {
	if perms[kind] == nil {
		return nil, nil
	}
	p, ok := perms[kind].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: write it as { allow: [...] }", kind)
	}
	for k := range p {
		if k != "allow" {
			return nil, fmt.Errorf("%s.%s: only allow lists are written as nsc flags", kind, k)
		}
	}
	var subjects []string
	switch v := p["allow"].(type) {
	case string:
		subjects = append(subjects, v)
	case []any:
		for _, s := range v {
			str, ok := s.(string)
			if !ok {
				return nil, fmt.Errorf("%s.allow: %v is not a subject", kind, s)
			}
			subjects = append(subjects, str)
		}
	}
	if slices.ContainsFunc(subjects, func(s string) bool { return strings.Contains(s, "'") }) {
		return nil, fmt.Errorf("%s.allow: a subject with a quote", kind)
	}
	return subjects, nil
}

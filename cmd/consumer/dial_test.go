package main_test

import "github.com/nats-io/nats.go"

func natsDial(url string) (*nats.Conn, error) { return nats.Connect(url) }

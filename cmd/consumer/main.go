// Command consumer runs the meter-read consumer: see README.md.
package main

import "os"

func main() { os.Exit(run(os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)) }

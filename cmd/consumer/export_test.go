package main

// Run is run, for the tests of the command line in package main_test: they
// run the same code as the binary, in-process, without a process's start.
var Run = run

// PermissionsDoc is where a refused permission points: "docs/<file>, <heading>".
const PermissionsDoc = permissionsDoc

// SetEnviron replaces the environment the CONSUMER_ names are checked in,
// until the test ends.
func SetEnviron(t interface{ Cleanup(func()) }, env []string) {
	old := environ
	environ = func() []string { return env }
	t.Cleanup(func() { environ = old })
}

package httpapi_test

import "net"

type net0 struct{}

// closedPort returns a loopback port with nothing listening on it.
func (net0) closedPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	return port, ln.Close()
}

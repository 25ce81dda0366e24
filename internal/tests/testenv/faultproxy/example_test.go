package faultproxy_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	"github.com/streamd/streamd/internal/tests/testenv/faultproxy"
)

// A proxy in front of a server: cut it, then heal it.
func Example() {
	server, _ := net.Listen("tcp", "127.0.0.1:0")
	defer func() { _ = server.Close() }()
	go func() {
		for {
			c, err := server.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("hello")) // a client that went away is no error here
			_ = c.Close()
		}
	}()
	p, _ := faultproxy.Listen("127.0.0.1:0", server.Addr().String())
	defer func() { _ = p.Close(context.Background()) }()

	read := func() string {
		c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
		if err != nil {
			return "dial refused"
		}
		defer func() { _ = c.Close() }()
		b := make([]byte, 5)
		if err := c.SetReadDeadline(time.Now().Add(time.Second)); err != nil {
			return err.Error()
		}
		n, _ := c.Read(b)
		return string(b[:n])
	}
	fmt.Println(read())
	if err := p.Set(faultproxy.Refuse); err != nil {
		log.Fatal(err)
	}
	fmt.Println(read())
	if err := p.Set(faultproxy.Pass); err != nil {
		log.Fatal(err)
	}
	fmt.Println(read())
	// Output:
	// hello
	// dial refused
	// hello
}

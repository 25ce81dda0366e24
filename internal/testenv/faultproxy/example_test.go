package faultproxy_test

import (
	"fmt"
	"net"
	"time"

	"github.com/streamd/streamd/internal/testenv/faultproxy"
)

// A proxy in front of a server: cut it, then heal it.
func Example() {
	server, _ := net.Listen("tcp", "127.0.0.1:0")
	defer server.Close()
	go func() {
		for {
			c, err := server.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello"))
			c.Close()
		}
	}()
	p, _ := faultproxy.Listen("127.0.0.1:0", server.Addr().String())
	defer p.Close()

	read := func() string {
		c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
		if err != nil {
			return "dial refused"
		}
		defer c.Close()
		b := make([]byte, 5)
		c.SetReadDeadline(time.Now().Add(time.Second))
		n, _ := c.Read(b)
		return string(b[:n])
	}
	fmt.Println(read())
	p.Set(faultproxy.Refuse)
	fmt.Println(read())
	p.Set(faultproxy.Pass)
	fmt.Println(read())
	// Output:
	// hello
	// dial refused
	// hello
}

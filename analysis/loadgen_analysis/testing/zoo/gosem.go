// The zoo's Go server: Go's own net/http, every request behind a semaphore of -slots (8)
// that it holds for -service (10ms) before answering a 64-byte body. -mode says how it
// answers, as real servers do:
//
//	plain    headers and body in one write
//	flush    headers flushed at once, the body after the service time (streaming APIs)
//	chunked  chunked: four 16-byte chunks, one each quarter of the service time
//	close    "Connection: close" on every answer while more requests wait than it has slots
//	backlog  no keep-alive, a listen backlog of -backlog (2) and a connection accepted only when
//	         a slot is free (as netutil.LimitListener does), so waiting clients overflow it
//
// /stats is its own counter (requests answered, connections accepted, peak waiting).
// Prints "listening on URL".
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

var body = []byte("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n")

func main() {
	slots := flag.Int("slots", 8, "requests served at once")
	service := flag.Duration("service", 10*time.Millisecond, "time each request holds a slot")
	mode := flag.String("mode", "plain", "plain, flush, chunked, close or backlog")
	backlog := flag.Int("backlog", 2, "listen backlog in -mode backlog")
	flag.Parse()
	sem := make(chan struct{}, *slots)
	var requests, accepted, waiting, peakWaiting atomic.Int64

	handler := http.NewServeMux()
	handler.HandleFunc("/stats", func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(map[string]int64{
			"requests": requests.Load(), "accepted": accepted.Load(), "peak_waiting": peakWaiting.Load(),
		})
	})
	handler.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		defer requests.Add(1)
		if *mode != "backlog" {
			n := waiting.Add(1)
			if n > peakWaiting.Load() {
				peakWaiting.Store(n)
			}
			sem <- struct{}{}
			waiting.Add(-1)
			defer func() { <-sem }()
		}
		if *mode == "close" && waiting.Load() > int64(*slots) {
			w.Header().Set("Connection", "close")
		}
		switch *mode {
		case "flush":
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			time.Sleep(*service)
			w.Write(body)
		case "chunked":
			for i := 0; i < 4; i++ {
				time.Sleep(*service / 4)
				w.Write(body[i*16 : (i+1)*16])
				w.(http.Flusher).Flush()
			}
		default:
			time.Sleep(*service)
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
			w.Write(body)
		}
	})

	lc := net.ListenConfig{}
	var ln net.Listener
	var err error
	if *mode == "backlog" {
		ln, err = listenBacklog(*backlog)
		if err == nil {
			ln = &limitListener{Listener: ln, sem: sem}
		}
	} else {
		ln, err = lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	server := &http.Server{Handler: handler, ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			accepted.Add(1)
		}
	}}
	if *mode == "backlog" {
		server.SetKeepAlivesEnabled(false)
	}
	fmt.Printf("listening on http://%s\n", ln.Addr())
	os.Stdout.Sync()
	server.Serve(ln)
}

// listenBacklog listens on 127.0.0.1:0 with a listen(2) backlog of n (Go's own listener uses
// the kernel's somaxconn) and accepts one connection at a time, as a single-threaded server
// with a small backlog does.
func listenBacklog(n int) (net.Listener, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		return nil, err
	}
	syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return nil, err
	}
	if err := syscall.Listen(fd, n); err != nil {
		return nil, err
	}
	return net.FileListener(os.NewFile(uintptr(fd), "backlog"))
}

// limitListener accepts a connection only while a slot is free; closing it frees the slot.
type limitListener struct {
	net.Listener
	sem chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.sem <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

type limitConn struct {
	net.Conn
	release func()
	closed  atomic.Bool
}

func (c *limitConn) Close() error {
	if !c.closed.Swap(true) {
		c.release()
	}
	return c.Conn.Close()
}

// SPDX-License-Identifier: GPL-2.0

// An ordinary Go TCP program, built static (CGO_ENABLED=0): no libc, so
// no LD_PRELOAD reaches it, and it knows nothing of rdmastream. switch.sh
// runs it under rdmastream-run's BPF switch and without it, and reads
// what it prints.
//
//	switch_peer proto         socket(AF_INET, SOCK_STREAM, 0) as
//	                          syscall.Socket makes it; prints
//	                          "proto N" (SO_PROTOCOL)
//	switch_peer xfer ADDR MB  net.Listen("tcp4", ADDR:0) and net.Dial to
//	                          it; MB MiB of pseudo-random bytes one way,
//	                          their SHA-256 back the other; prints
//	                          "listen N accept N dial N" (SO_PROTOCOL of
//	                          each socket) and "xfer ok BYTES", or the
//	                          error (exit status 1)
package main

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"
)

func protoOf(c syscall.Conn) int {
	rc, err := c.SyscallConn()
	if err != nil {
		return -1
	}
	p := -1
	rc.Control(func(fd uintptr) {
		v, err := syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET,
			syscall.SO_PROTOCOL)
		if err == nil {
			p = v
		}
	})
	return p
}

func proto() error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	p, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET,
		syscall.SO_PROTOCOL)
	if err != nil {
		return err
	}
	fmt.Printf("proto %d\n", p)
	return nil
}

// serve reads everything c sends and answers with its SHA-256.
func serve(c net.Conn, done chan<- error) {
	defer c.Close()
	h := sha256.New()
	if _, err := io.Copy(h, c); err != nil {
		done <- fmt.Errorf("server read: %w", err)
		return
	}
	_, err := c.Write(h.Sum(nil))
	done <- err
}

func xfer(addr string, mb int) error {
	ln, err := net.Listen("tcp4", net.JoinHostPort(addr, "0"))
	if err != nil {
		return err
	}
	defer ln.Close()
	c, err := net.DialTimeout("tcp4", ln.Addr().String(), 30*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		return err
	}
	fmt.Printf("listen %d accept %d dial %d\n",
		protoOf(ln.(*net.TCPListener)), protoOf(s.(*net.TCPConn)),
		protoOf(c.(*net.TCPConn)))
	done := make(chan error, 1)
	go serve(s, done)

	c.SetDeadline(time.Now().Add(120 * time.Second))
	buf := make([]byte, mb<<20)
	rand.New(rand.NewSource(int64(os.Getpid()))).Read(buf)
	want := sha256.Sum256(buf)
	if _, err := c.Write(buf); err != nil {
		return fmt.Errorf("client write: %w", err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return err
	}
	got, err := io.ReadAll(c)
	if err != nil {
		return fmt.Errorf("client read: %w", err)
	}
	if err := <-done; err != nil {
		return err
	}
	if !bytes.Equal(got, want[:]) {
		return errors.New("the server's SHA-256 differs")
	}
	fmt.Printf("xfer ok %d\n", len(buf))
	return nil
}

func main() {
	var err error

	switch {
	case len(os.Args) == 2 && os.Args[1] == "proto":
		err = proto()
	case len(os.Args) == 4 && os.Args[1] == "xfer":
		mb, e := strconv.Atoi(os.Args[3])
		if e != nil || mb < 1 {
			err = errors.New("bad MB")
			break
		}
		err = xfer(os.Args[2], mb)
	default:
		err = errors.New("usage: switch_peer proto | xfer ADDR MB")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "switch_peer:", err)
		os.Exit(1)
	}
}

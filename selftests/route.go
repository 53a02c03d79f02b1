// SPDX-License-Identifier: GPL-2.0

// Go through the IPPROTO route: syscall.Socket(AF_INET, SOCK_STREAM,
// IPPROTO_RDMASTREAM), handed to the net package with net.FileListener
// and net.FileConn. From there on the program uses net.Listener and
// net.Conn as with TCP: goroutines, deadlines, io.Copy.
//
// Each case checks what a Go program sees and that the bytes went over
// RDMA: the RDMA device's packet counter moves by at least one packet per
// 4 KiB carried, and kernel TCP opens no connection. Output is TAP in the
// shape of the kselftest harness, for run-tests.
//
// Environment: RS_ADDR, RS_ADDR6 (IPv6 case), RS_RDMADEV (rxe0),
// RS_IPPROTO (else the module's ipproto parameter), RS_ROUTE_MB (4).
package main

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

var (
	addr4   = env("RS_ADDR", "198.18.0.1")
	addr6   = os.Getenv("RS_ADDR6")
	rdmadev = env("RS_RDMADEV", "rxe0")
	proto   = ipproto()
	mb, _   = strconv.Atoi(env("RS_ROUTE_MB", "4"))
)

const timeout = 120 * time.Second

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func ipproto() int {
	s := os.Getenv("RS_IPPROTO")
	if s == "" {
		b, err := os.ReadFile("/sys/module/rdmastream/parameters/ipproto")
		if err != nil {
			return 260
		}
		s = strings.TrimSpace(string(b))
	}
	n, _ := strconv.Atoi(s)
	return n
}

func info(format string, a ...interface{}) {
	fmt.Printf("# "+format+"\n", a...)
}

func readInt(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

func rdmaPackets() int64 {
	return readInt("/sys/class/infiniband/" + rdmadev +
		"/ports/1/hw_counters/sent_pkts")
}

// Kernel TCP's active plus passive opens (/proc/net/snmp).
func tcpOpens() int64 {
	b, _ := os.ReadFile("/proc/net/snmp")
	var rows [][]string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "Tcp:") {
			rows = append(rows, strings.Fields(l))
		}
	}
	if len(rows) < 2 {
		return -1
	}
	var n int64
	for i, name := range rows[0] {
		if name == "ActiveOpens" || name == "PassiveOpens" {
			v, _ := strconv.ParseInt(rows[1][i], 10, 64)
			n += v
		}
	}
	return n
}

// overRDMA runs f and checks that nbytes went over RDMA, none over TCP.
func overRDMA(nbytes int64, f func() error) error {
	p0, o0 := rdmaPackets(), tcpOpens()
	if err := f(); err != nil {
		return err
	}
	pkts, opens := rdmaPackets()-p0, tcpOpens()-o0
	info("%d bytes: %d RDMA packets sent, %d TCP opens", nbytes, pkts,
		opens)
	if p0 < 0 || pkts < nbytes/4096 {
		return fmt.Errorf("only %d RDMA packets for %d bytes", pkts,
			nbytes)
	}
	if opens != 0 {
		return fmt.Errorf("%d TCP connections opened", opens)
	}
	return nil
}

func sockaddr(family int, ip net.IP, port int) syscall.Sockaddr {
	if family == syscall.AF_INET6 {
		sa := &syscall.SockaddrInet6{Port: port}
		copy(sa.Addr[:], ip.To16())
		return sa
	}
	sa := &syscall.SockaddrInet4{Port: port}
	copy(sa.Addr[:], ip.To4())
	return sa
}

func family(ip net.IP) int {
	if ip.To4() != nil {
		return syscall.AF_INET
	}
	return syscall.AF_INET6
}

// listen gives a net.Listener on a socket of the route.
func listen(ip net.IP) (net.Listener, error) {
	fam := family(ip)
	fd, err := syscall.Socket(fam, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC,
		proto)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	f := os.NewFile(uintptr(fd), "rdmastream-listener")
	defer f.Close()
	if err := syscall.Bind(fd, sockaddr(fam, ip, 0)); err != nil {
		return nil, fmt.Errorf("bind: %w", err)
	}
	if err := syscall.Listen(fd, 64); err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	return net.FileListener(f)
}

// dial gives a net.Conn connected through the route.
func dial(a *net.TCPAddr) (net.Conn, error) {
	fam := family(a.IP)
	fd, err := syscall.Socket(fam, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC,
		proto)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	f := os.NewFile(uintptr(fd), "rdmastream-conn")
	defer f.Close()
	if err := syscall.Connect(fd, sockaddr(fam, a.IP, a.Port)); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return net.FileConn(f)
}

func pattern(n, seed int) []byte {
	h := sha256.Sum256([]byte(strconv.Itoa(seed)))
	b := bytes.Repeat(h[:], n/len(h)+1)
	return b[:n]
}

// echo serves count connections of l, echoing each in a goroutine.
func echo(l net.Listener, count int) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Add(count)
	go func() {
		for i := 0; i < count; i++ {
			c, err := l.Accept()
			if err != nil {
				for ; i < count; i++ {
					wg.Done()
				}
				return
			}
			go func() {
				defer wg.Done()
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return &wg
}

// roundTrip sends data on c while reading it back, then half-closes.
func roundTrip(c net.Conn, data []byte) error {
	c.SetDeadline(time.Now().Add(timeout))
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(c)
		got <- b
	}()
	if _, err := c.Write(data); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		return fmt.Errorf("CloseWrite: %w", err)
	}
	b := <-got
	if !bytes.Equal(b, data) {
		return fmt.Errorf("%d bytes back of %d, or different", len(b),
			len(data))
	}
	return nil
}

func testNames() error {
	l, err := listen(net.ParseIP(addr4))
	if err != nil {
		return err
	}
	defer l.Close()
	la, ok := l.Addr().(*net.TCPAddr)
	if !ok || la.IP.String() != addr4 || la.Port == 0 {
		return fmt.Errorf("listener address %v (%T)", l.Addr(), l.Addr())
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	c, err := dial(la)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, ok := c.(*net.TCPConn); !ok {
		return fmt.Errorf("net.FileConn gave a %T", c)
	}
	if c.RemoteAddr().String() != la.String() {
		return fmt.Errorf("client's peer %v, listener %v", c.RemoteAddr(),
			la)
	}
	a := <-accepted
	if a == nil {
		return errors.New("accept failed")
	}
	defer a.Close()
	if a.RemoteAddr().String() != c.LocalAddr().String() {
		return fmt.Errorf("accepted peer %v, client %v", a.RemoteAddr(),
			c.LocalAddr())
	}
	return nil
}

func testEcho() error {
	n := mb << 20
	data := pattern(n, 1)
	return overRDMA(int64(2*n), func() error {
		l, err := listen(net.ParseIP(addr4))
		if err != nil {
			return err
		}
		defer l.Close()
		wg := echo(l, 1)
		c, err := dial(l.Addr().(*net.TCPAddr))
		if err != nil {
			return err
		}
		defer c.Close()
		err = roundTrip(c, data)
		wg.Wait()
		return err
	})
}

func testConcurrent() error {
	const clients = 16
	n := 256 << 10
	return overRDMA(int64(2*clients*n), func() error {
		l, err := listen(net.ParseIP(addr4))
		if err != nil {
			return err
		}
		defer l.Close()
		wg := echo(l, clients)
		errs := make(chan error, clients)
		for i := 0; i < clients; i++ {
			go func(i int) {
				c, err := dial(l.Addr().(*net.TCPAddr))
				if err != nil {
					errs <- err
					return
				}
				defer c.Close()
				errs <- roundTrip(c, pattern(n, 100+i))
			}(i)
		}
		for i := 0; i < clients; i++ {
			if err := <-errs; err != nil {
				return fmt.Errorf("client: %w", err)
			}
		}
		wg.Wait()
		return nil
	})
}

func testDeadline() error {
	l, err := listen(net.ParseIP(addr4))
	if err != nil {
		return err
	}
	defer l.Close()
	wg := echo(l, 1)
	c, err := dial(l.Addr().(*net.TCPAddr))
	if err != nil {
		return err
	}
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	t0 := time.Now()
	_, err = c.Read(make([]byte, 10))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		c.Close()
		return fmt.Errorf("read with nothing sent: %v", err)
	}
	if time.Since(t0) < 250*time.Millisecond {
		c.Close()
		return fmt.Errorf("deadline after %v", time.Since(t0))
	}
	err = roundTrip(c, []byte("after the deadline"))
	c.Close()
	wg.Wait()
	return err
}

func testRefused() error {
	l, err := listen(net.ParseIP(addr4))
	if err != nil {
		return err
	}
	a := l.Addr().(*net.TCPAddr)
	l.Close()
	_, err = dial(a)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("dial of a closed port: %v", err)
	}
	return nil
}

func testIPv6() error {
	if addr6 == "" {
		return errors.New("RS_ADDR6 is not set: IPv6 must be tested")
	}
	n := 1 << 20
	data := pattern(n, 2)
	return overRDMA(int64(2*n), func() error {
		l, err := listen(net.ParseIP(addr6))
		if err != nil {
			return err
		}
		defer l.Close()
		la := l.Addr().(*net.TCPAddr)
		if !la.IP.Equal(net.ParseIP(addr6)) {
			return fmt.Errorf("listener address %v", la)
		}
		wg := echo(l, 1)
		c, err := dial(la)
		if err != nil {
			return err
		}
		defer c.Close()
		err = roundTrip(c, data)
		wg.Wait()
		return err
	})
}

func main() {
	tests := []struct {
		name string
		f    func() error
	}{
		{"names", testNames},
		{"echo", testEcho},
		{"concurrent", testConcurrent},
		{"deadline", testDeadline},
		{"refused", testRefused},
		{"ipv6", testIPv6},
	}
	fmt.Println("TAP version 13")
	fmt.Printf("1..%d\n", len(tests))
	info("Starting %d tests through IPPROTO %d (%s)", len(tests), proto,
		runtime.Version())
	failed := 0
	for i, t := range tests {
		name := "route_go." + t.name
		fmt.Printf("#  RUN           %s ...\n", name)
		done := make(chan error, 1)
		go func() { done <- t.f() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(timeout + 30*time.Second):
			err = errors.New("timed out")
		}
		if err == nil {
			fmt.Printf("#            OK  %s\nok %d %s\n", name, i+1, name)
		} else {
			failed++
			info("%s: %v", name, err)
			fmt.Printf("#          FAIL  %s\nnot ok %d %s\n", name, i+1,
				name)
		}
	}
	info("Totals: pass:%d fail:%d xfail:0 xpass:0 skip:0 error:0",
		len(tests)-failed, failed)
	if failed > 0 {
		os.Exit(1)
	}
}

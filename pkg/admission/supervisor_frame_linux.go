//go:build linux

package admission

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
)

// The frames the drainer and the handler supervisor (supervisor_linux.go)
// exchange over their socket pair.

// Frame kinds.
const (
	// drainer → supervisor
	msgStart    = 1 // id, deadline, path, dir, argv, env, input, reply limit, stderr tail size
	msgDeadline = 2 // id, deadline (a renewal)
	msgKill     = 3 // id
	// supervisor → drainer
	msgReady       = 10 // pid
	msgStarted     = 11 // id, pid
	msgStartFailed = 12 // id, why, text
	msgEnded       = 13 // id, wait status, when, killed at the deadline, deadline, stdout, over the limit, stderr tail
)

// Why a start failed.
const (
	startExecFailed = 1 // the handler could not be executed
	startTooLate    = 2 // the lease deadline had passed
	startNoPipes    = 3 // the handler's pipes could not be made
)

// maxFrame bounds a frame (a handler's input, argv and environment; its
// reply and stderr tail).
const maxFrame = 64 << 20

type encoder struct{ b []byte }

func newFrame(kind byte) *encoder { return &encoder{b: []byte{0, 0, 0, 0, kind}} }

func (e *encoder) u64(v uint64) *encoder { e.b = binary.LittleEndian.AppendUint64(e.b, v); return e }
func (e *encoder) i64(v int64) *encoder  { return e.u64(uint64(v)) }
func (e *encoder) str(s string) *encoder {
	e.b = binary.LittleEndian.AppendUint32(e.b, uint32(len(s)))
	e.b = append(e.b, s...)
	return e
}

func (e *encoder) strs(ss []string) *encoder {
	e.b = binary.LittleEndian.AppendUint32(e.b, uint32(len(ss)))
	for _, s := range ss {
		e.str(s)
	}
	return e
}

func (e *encoder) bytes() []byte {
	binary.LittleEndian.PutUint32(e.b, uint32(len(e.b)-4))
	return e.b
}

type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) take(n int) []byte {
	if d.bad || n < 0 || n > len(d.b) {
		d.bad = true
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u64() uint64 {
	if v := d.take(8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

func (d *decoder) i64() int64 { return int64(d.u64()) }

func (d *decoder) u32() int {
	if v := d.take(4); v != nil {
		return int(binary.LittleEndian.Uint32(v))
	}
	return 0
}

func (d *decoder) str() string { return string(d.take(d.u32())) }

func (d *decoder) strs() []string {
	n := d.u32()
	if n > len(d.b)/4 {
		d.bad = true
		return nil
	}
	ss := make([]string, n)
	for i := range ss {
		ss[i] = d.str()
	}
	return ss
}

// frameReader reads frames from a stream socket.
type frameReader struct {
	conn *net.UnixConn
	buf  []byte
	rbuf []byte
}

func newFrameReader(conn *net.UnixConn) *frameReader {
	return &frameReader{conn: conn, rbuf: make([]byte, 64<<10)}
}

func (r *frameReader) fill() error {
	n, err := r.conn.Read(r.rbuf)
	r.buf = append(r.buf, r.rbuf[:n]...)
	if err == nil && n == 0 {
		err = io.EOF
	}
	return err
}

// frame returns the next frame's body.
func (r *frameReader) frame() ([]byte, error) {
	for {
		body, rest, err := cutFrame(r.buf)
		if err != nil {
			return nil, err
		}
		if body != nil {
			r.buf = rest
			return append([]byte(nil), body...), nil
		}
		if err := r.fill(); err != nil {
			return nil, err
		}
	}
}

// cutFrame splits the first frame off buf: its body, nil until buf holds
// all of it, and the rest.
func cutFrame(buf []byte) (body, rest []byte, err error) {
	if len(buf) < 4 {
		return nil, buf, nil
	}
	n := int(binary.LittleEndian.Uint32(buf))
	if n < 1 || n > maxFrame {
		return nil, buf, fmt.Errorf("bad frame length %d", n)
	}
	if len(buf) < 4+n {
		return nil, buf, nil
	}
	return buf[4 : 4+n], buf[4+n:], nil
}

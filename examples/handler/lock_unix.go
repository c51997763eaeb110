//go:build unix

package main

import (
	"errors"
	"os"
	"syscall"
)

// held keeps the lock's file open (a collected *os.File would close it):
// written once, never read.
//
//lint:ignore U1000 it is the reference that keeps the file from being collected
var held *os.File

// lockSession takes an exclusive flock on path, kept until the process
// ends; false when another process holds it.
func lockSession(path string) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return false, err
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		f.Close()
		return false, nil
	}
	if err != nil {
		f.Close()
		return false, err
	}
	held = f // the lock lives as long as the process
	return true, nil
}

// Command producerhello is a hello world that links hermesq's producer
// plugin host (pkg/producer: go-plugin, gRPC, protobuf) and does nothing
// with it: the bench measures what linking that host adds to the start of
// every hermesq command.
package main

import (
	"fmt"

	_ "github.com/hermesq/hermesq/pkg/producer"
)

func main() { fmt.Println("hello, world") }

// Command producerhello is a hello world that links hermesq's producer
// plugin transport (pkg/producer/plugin: go-plugin, gRPC, protobuf) and does nothing
// with it: the bench measures what linking it adds to the start of a
// program (hermesq-producers pays it; hermesq no longer links it).
package main

import (
	"fmt"

	_ "github.com/hermesq/hermesq/pkg/producer/plugin"
)

func main() { fmt.Println("hello, world") }

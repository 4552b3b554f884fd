// Command airlock is the Airlock daemon (airlock serve) and its client.
package main

import (
	"os"

	"github.com/airlockdev/airlock/internal/cli"
)

func main() {
	os.Exit(cli.Main())
}

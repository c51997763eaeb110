// Package clihello is the smallest CLI built like hermesq's: a cobra root
// command with one command, reading its settings through viper from the
// environment and a config file, and doing nothing else. The bench's
// cmd/cobrahello runs it alone and cmd/storehello with hermesq's stores
// linked.
package clihello

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"
)

// Main runs the CLI named name and exits 1 on an error.
func Main(name string) {
	v := viper.New()
	v.SetEnvPrefix("HERMESQ")
	v.AutomaticEnv()
	v.SetConfigName("config")
	v.AddConfigPath(os.Getenv("XDG_CONFIG_HOME"))
	_ = v.ReadInConfig()
	root := &cobra.Command{Use: name, SilenceUsage: true}
	root.AddCommand(&cobra.Command{
		Use: "admit",
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := fmt.Println("hello,", v.GetString("store"))
			return err
		},
	})
	if err := root.Execute(); err != nil {
		os.Exit(1)
	}
}

//go:build !windows && !darwin

package app

func showError(title, message string) { linuxDialog(title, message) }

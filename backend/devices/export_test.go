package devices

// SetAfterTokenCheck makes s call f (on the connecting device's goroutine)
// after a device token matched and before the gateway registers the
// connection; tests use it to land a revoke in between.
func SetAfterTokenCheck(s *Service, f func(deviceID string)) { s.afterTokenCheck = f }

package devices

// SetAfterTokenCheck makes s call f (on the connecting device's goroutine)
// after a device token matched and before the gateway registers the
// connection; tests use it to land a revoke in between.
func SetAfterTokenCheck(s *Service, f func(deviceID string)) { s.afterTokenCheck = f }

// SetAfterRequest makes s call f (on the connecting device's goroutine)
// after its pairing request was submitted and before the gateway registers
// the connection; tests use it to resolve the request in between.
func SetAfterRequest(s *Service, f func(requestID string)) { s.afterRequest = f }

// For other packages' tests: a real identity server on a fresh test database
// (startTestServer: REST + gRPC listeners on ephemeral ports, a bootstrapped
// owner owner@example.com / owner-password-1), or the domain alone.
export { startTestServer, LogCapture, type TestServer } from "./server.ts";
export { createFixture, movableClock, FAST_ARGON2, type Fixture } from "./fixture.ts";

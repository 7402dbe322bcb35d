"""The local Azure: an HTTPS, ARM-compatible emulator on loopback that the real SDKs talk to."""

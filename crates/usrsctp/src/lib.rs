//! User-space SCTP over UDP (RFC 6951) on Debian's libusrsctp. (Work in progress.)

//! One module per subcommand.

pub mod bench;
pub mod candidates;
pub mod connect;
pub mod listen;

//! One module per subcommand.

pub mod candidates;
pub mod connect;
pub mod listen;

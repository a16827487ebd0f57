//! One module per subcommand.

pub mod candidates;

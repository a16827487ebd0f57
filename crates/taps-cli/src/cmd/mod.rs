//! One module per subcommand.

pub(crate) mod candidates;
pub(crate) mod connect;
pub(crate) mod docs;
pub(crate) mod get;
pub(crate) mod listen;
pub(crate) mod pm;

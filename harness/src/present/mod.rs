//! What the CLI shows a person (over `text`'s figures and tables): the pager, curves, `diff`, `review`, the
//! site, and how an error reads.
pub mod diff;
pub mod pager;
pub mod plot;
pub mod predicted;
pub mod report;
pub mod review;
pub mod site;
pub mod stats;
pub mod walk;

//! What the CLI shows a person (over `text`'s figures and tables): the pager, curves, the
//! typed report of a record (`report`) that `review` and the site render, `diff`, the site.
pub mod diff;
pub mod pager;
pub mod plot;
pub mod predicted;
pub mod report;
pub mod review;
pub mod site;
pub mod stats;
pub mod walk;

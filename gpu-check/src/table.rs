//! The one table: a row per measurement, each with the status that decides the exit code.

/// What a row says about its check. The table renders it inside the result cell, so the columns
/// stay `check | result | reference / notes`.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// A measurement with no pass/fail bound (a time, a throughput, memory).
    Info,
    /// Within its bound.
    Ok,
    /// Outside its bound.
    Fail,
    /// Not started: the time budget ran out before it.
    Skipped,
    /// The check stopped with this error (a libtorch panic included).
    Error(String),
}

impl Status {
    /// `Ok` when `pass`, else `Fail`.
    pub fn judge(pass: bool) -> Status {
        if pass {
            Status::Ok
        } else {
            Status::Fail
        }
    }

    /// Whether the row lets the run exit 0.
    pub fn passed(&self) -> bool {
        matches!(self, Status::Info | Status::Ok)
    }
}

pub struct Row {
    pub check: String,
    /// The measurement, without the verdict.
    result: String,
    pub status: Status,
    notes: String,
}

impl Row {
    /// A measurement with no bound.
    pub fn new(
        check: impl Into<String>,
        result: impl Into<String>,
        notes: impl Into<String>,
    ) -> Row {
        Row::judged(check, result, Status::Info, notes)
    }

    /// A measurement and its verdict.
    pub fn judged(
        check: impl Into<String>,
        result: impl Into<String>,
        status: Status,
        notes: impl Into<String>,
    ) -> Row {
        Row { check: check.into(), result: result.into(), status, notes: notes.into() }
    }

    /// A check that measured nothing (skipped or stopped by an error).
    pub fn status(check: impl Into<String>, status: Status, notes: impl Into<String>) -> Row {
        Row::judged(check, "", status, notes)
    }

    /// The result column: the measurement with its verdict, or what stopped the check.
    pub fn result_cell(&self) -> String {
        let result = &self.result;
        match &self.status {
            Status::Info => result.clone(),
            Status::Ok => format!("{result} (ok)"),
            Status::Fail => format!("{result} (FAIL)"),
            Status::Skipped => "skipped".into(),
            Status::Error(e) => format!("error: {e}"),
        }
    }
}

/// The rows as a markdown table.
pub fn render(rows: &[Row]) -> String {
    let cell = |s: &str| s.replace('|', "\\|").replace('\n', " ");
    let mut out = String::from("| check | result | reference / notes |\n|---|---|---|\n");
    for r in rows {
        out +=
            &format!("| {} | {} | {} |\n", cell(&r.check), cell(&r.result_cell()), cell(&r.notes));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_status_renders_in_the_result_cell() {
        let rows = [
            Row::new("record #1 MFU", "41.2 %", "6N + 12·L·C·T"),
            Row::judged("flash fwd: dense", "max abs err 0.0039", Status::Ok, "tol 0.080"),
            Row::judged("fp8", "rel err fwd 0.2000", Status::Fail, ""),
            Row::status("graph", Status::Skipped, "past the 180 s budget (--budget-s)"),
            Row::status("eval", Status::Error("CUDA out of memory\nat a | b".into()), ""),
        ];
        assert_eq!(
            render(&rows),
            "| check | result | reference / notes |\n|---|---|---|\n\
             | record #1 MFU | 41.2 % | 6N + 12·L·C·T |\n\
             | flash fwd: dense | max abs err 0.0039 (ok) | tol 0.080 |\n\
             | fp8 | rel err fwd 0.2000 (FAIL) |  |\n\
             | graph | skipped | past the 180 s budget (--budget-s) |\n\
             | eval | error: CUDA out of memory at a \\| b |  |\n"
        );
    }

    #[test]
    fn only_info_and_ok_pass() {
        let passed: Vec<bool> =
            [Status::Info, Status::Ok, Status::Fail, Status::Skipped, Status::Error("x".into())]
                .iter()
                .map(Status::passed)
                .collect();
        assert_eq!(passed, [true, true, false, false, false]);
        assert_eq!(Status::judge(true), Status::Ok);
        assert_eq!(Status::judge(false), Status::Fail);
    }
}

//! The untie (upstream #53): at 2/3 of training the input embedding stops reading the lm_head's
//! weight. It gets a table of its own that starts as a copy of the head's, and Adam takes it on
//! with the head's state (m and v; the step count is shared), so neither jumps. Until then the
//! table (`Role::LateEmbed`) has no gradient and Adam leaves it alone; the schedule's plan says
//! at which step (`untie_after`).
use super::dist_adam::DistAdam;
use crate::model::params::Role;
use anyhow::{bail, ensure, Result};

impl DistAdam {
    /// Copies the head's weight and this rank's Adam state into the untied embedding's.
    pub fn untie(&mut self) -> Result<()> {
        let find = |role| self.params.iter().position(|p| p.group.role == role);
        let (Some(h), Some(e)) = (find(Role::Head), find(Role::LateEmbed)) else {
            bail!("untie: needs the head and the untied embedding in this Adam")
        };
        ensure!(!self.state.is_empty(), "untie: comes after Adam's first step");
        tch::no_grad(|| self.params[e].tensor.shallow_clone().f_copy_(&self.params[h].tensor))?;
        let (m, v) = (self.state[h].0.copy(), self.state[h].1.copy());
        self.state[e] = (m, v);
        Ok(())
    }
}

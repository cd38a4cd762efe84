//! Which rank this process is: torchrun's variables first, then Slurm's, else a single process.
use std::time::Duration;
use thiserror::Error;

/// Where the rank layout came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// No launcher variables: one process, world size 1.
    Single,
    /// `RANK`/`WORLD_SIZE`/... as torchrun and `records replay --gpus N` set them.
    Torchrun,
    /// `SLURM_PROCID`/`SLURM_NTASKS`/... from `srun`.
    Slurm,
}

/// This process's place in the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankEnv {
    pub rank: usize,
    pub world: usize,
    pub local_rank: usize,
    pub local_world: usize,
    /// Rank 0's host; empty when `world == 1`.
    pub master_addr: String,
    /// torchrun's `MASTER_PORT`; 0 when `world == 1`.
    pub master_port: u16,
    /// `TORCHELASTIC_USE_AGENT_STORE=True`: torchrun's agent already hosts a TCPStore on
    /// `MASTER_PORT`, so rank 0 must not listen there (see [`RankEnv::tcp_port`]).
    pub agent_store: bool,
    /// How long a collective waits for a silent peer before failing (`RECORDS_DIST_TIMEOUT_S`).
    pub timeout: Duration,
    pub source: Source,
}

/// A launcher variable that is missing, unparsable or inconsistent.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum EnvError {
    #[error("{var} is not set, but {because}")]
    Missing { var: &'static str, because: String },
    #[error("{var}={value:?} is not {expected}")]
    Parse { var: &'static str, value: String, expected: &'static str },
    #[error("{var}={value} must be less than {limit_var}={limit}")]
    OutOfRange { var: &'static str, value: usize, limit_var: &'static str, limit: usize },
    #[error(
        "this is Slurm task {procid} of SLURM_NTASKS={ntasks}, but {var} is not set: export \
         MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n1) and \
         MASTER_PORT=<free port> in the sbatch script before srun"
    )]
    SlurmMaster { var: &'static str, procid: usize, ntasks: usize },
    #[error(
        "MASTER_PORT={0} under torchrun's agent store leaves no port above it for the CPU backend"
    )]
    NoTcpPort(u16),
}

/// Default for [`RankEnv::timeout`]: long enough for uneven steps, short enough to not hang.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

impl RankEnv {
    /// World size 1: what `train` started by hand gets.
    pub fn single() -> RankEnv {
        RankEnv {
            rank: 0,
            world: 1,
            local_rank: 0,
            local_world: 1,
            master_addr: String::new(),
            master_port: 0,
            agent_store: false,
            timeout: DEFAULT_TIMEOUT,
            source: Source::Single,
        }
    }

    /// Reads the process environment.
    pub fn from_env() -> Result<RankEnv, EnvError> {
        RankEnv::from_vars(|k| std::env::var(k).ok())
    }

    /// Reads the layout through `get` (tests pass a map). torchrun's `RANK`/`WORLD_SIZE` win over
    /// Slurm's, so `torchrun` inside an allocation works; neither set means a single process.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<RankEnv, EnvError> {
        let timeout = match get("RECORDS_DIST_TIMEOUT_S") {
            None => DEFAULT_TIMEOUT,
            Some(v) => match v.trim().parse::<u64>() {
                Ok(s) if s > 0 => Duration::from_secs(s),
                _ => {
                    return Err(parse_err(
                        "RECORDS_DIST_TIMEOUT_S",
                        &v,
                        "a positive number of seconds",
                    ))
                }
            },
        };
        let env = if get("RANK").is_some() || get("WORLD_SIZE").is_some() {
            torchrun(&get)?
        } else if get("SLURM_PROCID").is_some() {
            slurm(&get)?
        } else {
            RankEnv::single()
        };
        Ok(RankEnv { timeout, ..env })
    }

    pub fn is_main(&self) -> bool {
        self.rank == 0
    }

    /// The port the CPU backend's rank 0 listens on. `MASTER_PORT` itself, except under torchrun's
    /// agent store, where the agent's TCPStore holds `MASTER_PORT` and we take `MASTER_PORT + 1`.
    pub fn tcp_port(&self) -> Result<u16, EnvError> {
        if self.agent_store {
            self.master_port.checked_add(1).ok_or(EnvError::NoTcpPort(self.master_port))
        } else {
            Ok(self.master_port)
        }
    }
}

fn torchrun(get: &impl Fn(&str) -> Option<String>) -> Result<RankEnv, EnvError> {
    let because =
        "RANK or WORLD_SIZE is (torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE)";
    let need = |var: &'static str| {
        get(var).ok_or_else(|| EnvError::Missing { var, because: because.to_string() })
    };
    let rank = count("RANK", &need("RANK")?)?;
    let world = count("WORLD_SIZE", &need("WORLD_SIZE")?)?;
    let local_rank = count("LOCAL_RANK", &need("LOCAL_RANK")?)?;
    let local_world = count("LOCAL_WORLD_SIZE", &need("LOCAL_WORLD_SIZE")?)?;
    let (master_addr, master_port) = master(get, world, |var| EnvError::Missing {
        var,
        because: format!("WORLD_SIZE={world} needs rank 0's address"),
    })?;
    let env = RankEnv {
        rank,
        world,
        local_rank,
        local_world,
        master_addr,
        master_port,
        agent_store: get("TORCHELASTIC_USE_AGENT_STORE").as_deref() == Some("True"),
        timeout: DEFAULT_TIMEOUT,
        source: Source::Torchrun,
    };
    validate(&env, ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"])?;
    Ok(env)
}

/// Rank 0's address and port (MASTER_ADDR, MASTER_PORT), needed only with more than one rank;
/// `missing` explains an absent one in the launcher's terms.
fn master(
    get: &impl Fn(&str) -> Option<String>,
    world: usize,
    missing: impl Fn(&'static str) -> EnvError,
) -> Result<(String, u16), EnvError> {
    if world <= 1 {
        return Ok((String::new(), 0));
    }
    let addr = get("MASTER_ADDR").ok_or_else(|| missing("MASTER_ADDR"))?;
    let port = get("MASTER_PORT").ok_or_else(|| missing("MASTER_PORT"))?;
    Ok((addr, port_of(&port)?))
}

fn slurm(get: &impl Fn(&str) -> Option<String>) -> Result<RankEnv, EnvError> {
    let need = |var: &'static str| {
        get(var).ok_or_else(|| EnvError::Missing {
            var,
            because: "SLURM_PROCID is (srun sets SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID)"
                .to_string(),
        })
    };
    let rank = count("SLURM_PROCID", &need("SLURM_PROCID")?)?;
    let world = count("SLURM_NTASKS", &need("SLURM_NTASKS")?)?;
    let local_rank = count("SLURM_LOCALID", &need("SLURM_LOCALID")?)?;
    let local_world = match get("SLURM_NTASKS_PER_NODE") {
        Some(v) => count("SLURM_NTASKS_PER_NODE", &v)?,
        None => tasks_per_node(&need("SLURM_TASKS_PER_NODE")?)?,
    };
    let (master_addr, master_port) =
        master(get, world, |var| EnvError::SlurmMaster { var, procid: rank, ntasks: world })?;
    let env = RankEnv {
        rank,
        world,
        local_rank,
        local_world,
        master_addr,
        master_port,
        agent_store: false,
        timeout: DEFAULT_TIMEOUT,
        source: Source::Slurm,
    };
    validate(&env, ["SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"])?;
    Ok(env)
}

/// `SLURM_TASKS_PER_NODE` looks like `8(x2)` or `8`; only a uniform layout is usable here.
fn tasks_per_node(v: &str) -> Result<usize, EnvError> {
    // "8(x2)" repeats 8 on two nodes; a list such as "8,4" is not uniform and fails to parse.
    let head = match v.split_once('(') {
        Some((n, rest)) if rest.ends_with(')') && !rest.contains(',') => n,
        _ => v,
    };
    head.parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(|| {
        parse_err(
            "SLURM_TASKS_PER_NODE",
            v,
            "a uniform task count such as 8 or 8(x2) (set --ntasks-per-node)",
        )
    })
}

/// Checks rank < world and local rank < local world; `names` are the four variables' names.
fn validate(env: &RankEnv, names: [&'static str; 4]) -> Result<(), EnvError> {
    let [rank, world, local_rank, local_world] = names;
    for (var, value) in [(world, env.world), (local_world, env.local_world)] {
        if value == 0 {
            return Err(parse_err(var, "0", "a count of at least 1"));
        }
    }
    let checks = [
        (rank, env.rank, world, env.world),
        (local_rank, env.local_rank, local_world, env.local_world),
    ];
    for (var, value, limit_var, limit) in checks {
        if value >= limit {
            return Err(EnvError::OutOfRange { var, value, limit_var, limit });
        }
    }
    Ok(())
}

fn count(var: &'static str, value: &str) -> Result<usize, EnvError> {
    value.trim().parse().map_err(|_| parse_err(var, value, "a non-negative integer"))
}

fn port_of(value: &str) -> Result<u16, EnvError> {
    value
        .trim()
        .parse::<u16>()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| parse_err("MASTER_PORT", value, "a port number in 1..=65535"))
}

fn parse_err(var: &'static str, value: &str, expected: &'static str) -> EnvError {
    EnvError::Parse { var, value: value.to_string(), expected }
}

